package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// TestDrainEndsEveryWait: with a real Redis, Drain on one replica ends its waiters'
// waits with SHUTTING_DOWN naming the gate, removes their queue entries from Redis
// (the other replica's queue is untouched), and refuses later requests; the permit
// held through the drain releases as usual.
func TestDrainEndsEveryWait(t *testing.T) {
	const conn, model = "connection:c1", "model:c1:m"
	reps := replicas(t, 2, map[string]int{model: 1}, Options{})
	a, b := reps[0], reps[1]
	req := admission.Request{Gates: path("provider:p", conn, model)}
	holder := mustTryAcquire(t, a, req)
	var waiting []<-chan result
	for range 5 {
		waiting = append(waiting, acquireAsync(t.Context(), a, req))
	}
	other := acquireAsync(t.Context(), b, req)
	waitFor(t, 5*time.Second, "6 queued", func() bool { return zcard(t, a.rdb, a.keys.queue(model)) == 6 })

	a.Drain()
	a.Drain() // idempotent
	for i, ch := range waiting {
		r := recv(t, ch, 5*time.Second)
		var ae *admission.Error
		if r.p != nil || !errors.As(r.err, &ae) || !errors.Is(r.err, admission.ErrShuttingDown) || ae.Gate.Key != model {
			t.Fatalf("waiter %d: permit %v, error %v; want SHUTTING_DOWN at %s", i, r.p, r.err, model)
		}
	}
	waitFor(t, 5*time.Second, "the drained waiters' entries gone from Redis", func() bool {
		return zcard(t, a.rdb, a.keys.queue(model)) == 1
	})
	if _, ok := a.TryAcquire(admission.Request{Gates: path("provider:q")}); ok {
		t.Error("TryAcquire admitted after Drain")
	}
	if _, err := a.Acquire(t.Context(), req); !errors.Is(err, admission.ErrShuttingDown) {
		t.Errorf("Acquire after Drain = %v, want SHUTTING_DOWN", err)
	}

	// The other replica's waiter gets the slot the held permit gives back.
	holder.Release()
	r := recv(t, other, 5*time.Second)
	if r.err != nil {
		t.Fatalf("the other replica's waiter: %v, want admitted", r.err)
	}
	r.p.Release()
}
