package cluster

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// TestInFlightAtAcrossReplicas (issue 23, item 5): a grant tells how many
// requests held each capped gate of its path across the cluster right after
// it was admitted, itself included — through the uncontended script and
// after a wait — so the adaptive learner can tell that a request found a
// shared gate full when this replica alone holds little of it. Uncapped
// gates and gates not on the path are not counted.
func TestInFlightAtAcrossReplicas(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 2, map[string]int{gate: 4}, Options{})
	req := admission.Request{Gates: path("global", gate), MaxWait: 30 * time.Second}
	var held []admission.Grant
	for range 3 {
		held = append(held, mustTryAcquire(t, reps[0], req))
	}
	p, err := reps[1].Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	ci, ok := p.(admission.ClusterInFlight)
	if !ok {
		t.Fatalf("grant %T does not implement admission.ClusterInFlight", p)
	}
	if n, ok := ci.InFlightAt(gate); !ok || n != 4 {
		t.Errorf("InFlightAt(%s) = %d, %v; want 4, true (3 on the other replica and itself)", gate, n, ok)
	}
	if n, ok := ci.InFlightAt("global"); ok {
		t.Errorf("InFlightAt(global) = %d, true; want false (uncapped)", n)
	}
	if n, ok := ci.InFlightAt("model:c1:m"); ok {
		t.Errorf("InFlightAt of a gate not on the path = %d, true; want false", n)
	}

	// The gate is full: the next request waits, and is admitted when one of
	// the other replica's requests ends; it then finds the gate full again.
	waiting := acquireAsync(t.Context(), reps[1], req)
	waitFor(t, 5*time.Second, "the waiter queued", func() bool { return zcard(t, reps[0].rdb, reps[0].keys.queue(gate)) == 1 })
	held[0].Release()
	r := recv(t, waiting, 5*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n, ok := r.p.(admission.ClusterInFlight).InFlightAt(gate); !ok || n != 4 {
		t.Errorf("after a wait: InFlightAt(%s) = %d, %v; want 4, true", gate, n, ok)
	}
	for _, s := range reps[1].Stats() {
		if s.Key == gate && s.InFlight != 4 {
			t.Errorf("replica 1 Stats InFlight of %s = %d, want the cluster-wide 4", gate, s.InFlight)
		}
	}
	r.p.Release()
	p.Release()
	for _, h := range held[1:] {
		h.Release()
	}
}
