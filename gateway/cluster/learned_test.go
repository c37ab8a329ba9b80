package cluster

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// effectiveCap is gateway i's effective cap of gate key.
func (e *twoGateways) effectiveCap(i int, key string) int {
	for _, g := range e.gws[i].Snapshot().Gates {
		if g.Key == key {
			return g.EffectiveCap
		}
	}
	return -1
}

// TestSharedLearnedCap: two replicas of an adaptive connection keep one
// learned value per gate in Redis. A burst of concurrency 429s seen through
// both replicas cuts once (8 → 5, not 8 → 5 → 3); each replica adopts the
// other's cuts; and what is shared is what admission enforces on both.
func TestSharedLearnedCap(t *testing.T) {
	e := newTwoGateways(t, upstreamtest.Options{})
	o := limits.Overrides{MaxConcurrent: ptr(8), MaxWaitMs: ptr(10000), Adaptive: ptr(true)}
	e.apply(e.conn("a", "ka", 10, o), e.conn("b", "kb", 0, limits.Overrides{}))
	ctx := t.Context()

	// The account takes one request at a time; one is held there.
	hold := make(chan struct{})
	if err := e.up.SetKeyBehavior("ka", upstreamtest.Behavior{Hold: hold, MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(hold)
	wg.Go(func() {
		if r := e.post(ctx, 0); r.status != http.StatusOK || r.header.Get(gateway.HeaderConnection) != "conn-a" {
			t.Errorf("held request: %d via %q", r.status, r.header.Get(gateway.HeaderConnection))
		}
	})
	if err := e.up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	viaB := func(i int) {
		t.Helper()
		if r := e.post(ctx, i); r.status != http.StatusOK || r.header.Get(gateway.HeaderConnection) != "conn-b" {
			t.Fatalf("request via gateway %d: %d via %q, want 200 via conn-b (the 429 fails over)", i, r.status, r.header.Get(gateway.HeaderConnection))
		}
	}

	// The burst: a 429 through each replica.
	viaB(0)
	viaB(1)
	for i := range e.gws {
		if got := e.effectiveCap(i, "connection:a"); got != 5 {
			t.Errorf("gateway %d: effective cap %d after one burst, want 5 (cut once across replicas)", i, got)
		}
	}

	// The next burst, after the cut window, through gateway B: 5 → 3, and
	// gateway A adopts it.
	waitFor(t, 10*time.Second, "gateway B's next cut", func() bool {
		viaB(1)
		return e.effectiveCap(1, "connection:a") == 3
	})
	waitFor(t, 5*time.Second, "gateway A adopting gateway B's cut", func() bool {
		if e.effectiveCap(0, "connection:a") == 3 {
			return true
		}
		viaB(0) // a request reads the shared state
		return e.effectiveCap(0, "connection:a") == 3
	})
	for i := range e.gws {
		for _, g := range e.gws[i].Snapshot().Gates {
			if g.Key == "connection:a" && (g.Cap != 8 || !g.Adaptive) {
				t.Errorf("gateway %d: live gate %+v, want cap 8, adaptive", i, g)
			}
		}
	}
}

// TestLearnedCapClimbsAcrossReplicas (issue 23, item 5): an adaptive
// connection with cap 8 behind two replicas is cut to 5 by a burst of
// concurrency 429s; then the upstream stops rejecting and eight clients,
// four per replica, keep it busy. Each replica alone never has 5 requests in
// flight, but the gate is full across the cluster, and that is what "found
// the gate full" counts: the learned cap climbs back to 8 on both replicas
// within 60 s (10 s quiet after the cut, then one step per 10 × cap full
// successes).
func TestLearnedCapClimbsAcrossReplicas(t *testing.T) {
	e := newTwoGateways(t, upstreamtest.Options{})
	o := limits.Overrides{MaxConcurrent: ptr(8), MaxWaitMs: ptr(30000), Adaptive: ptr(true)}
	e.apply(e.conn("a", "ka", 0, o))
	ctx := t.Context()

	// The cut: the account takes one request at a time while two arrive.
	hold := make(chan struct{})
	if err := e.up.SetKeyBehavior("ka", upstreamtest.Behavior{Hold: hold, MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	held := make(chan struct{})
	go func() {
		defer close(held)
		_ = e.post(ctx, 0)
	}()
	if err := e.up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_ = e.post(ctx, 1) // 429: too many concurrent requests
	close(hold)
	<-held
	waitFor(t, 5*time.Second, "both replicas at the cut cap", func() bool {
		if e.effectiveCap(0, "connection:a") != 5 {
			_ = e.post(ctx, 0) // a request reads the shared state
		}
		return e.effectiveCap(0, "connection:a") == 5 && e.effectiveCap(1, "connection:a") == 5
	})

	// The upstream stops rejecting; eight clients keep the gate busy.
	if err := e.up.SetKeyBehavior("ka", upstreamtest.Behavior{Latency: 2 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				if r := e.post(ctx, i%2); r.status != http.StatusOK {
					t.Errorf("client %d: status %d", i, r.status)
					return
				}
			}
		})
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && (e.effectiveCap(0, "connection:a") < 8 || e.effectiveCap(1, "connection:a") < 8) {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // sampling the live view, not synchronising
		}
	}
	stop.Store(true)
	wg.Wait()
	for i := range e.gws {
		if got := e.effectiveCap(i, "connection:a"); got != 8 {
			t.Errorf("gateway %d: effective cap %d 60 s after the upstream stopped rejecting, want back at 8", i, got)
		}
	}
}
