package admission

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// refs builds a path from gate keys.
func refs(keys ...string) []GateRef {
	out := make([]GateRef, len(keys))
	for i, k := range keys {
		out[i] = GateRef{Level: LevelOf(k), Key: k}
	}
	return out
}

// result is what an asynchronous Acquire returned.
type result struct {
	p   *Permit
	err error
}

// acquireAsync starts Acquire in a goroutine and returns where its result lands.
func acquireAsync(ctx context.Context, c *Controller, req Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := c.Acquire(ctx, req)
		ch <- result{p, err}
	}()
	return ch
}

// mustAcquire acquires at once or fails the test.
func mustAcquire(t *testing.T, c *Controller, keys ...string) *Permit {
	t.Helper()
	p, ok := c.TryAcquire(Request{Gates: refs(keys...)})
	if !ok {
		t.Fatalf("TryAcquire(%v) = false, want an immediate admission", keys)
	}
	return p
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// gateOf returns the stats of the gate key, if the controller knows it.
func gateOf(c *Controller, key string) (GateStats, bool) {
	all := c.Stats()
	i := slices.IndexFunc(all, func(s GateStats) bool { return s.Key == key })
	if i < 0 {
		return GateStats{}, false
	}
	return all[i], true
}

// gateStat returns the stats of key, failing the test if the gate is unknown.
func gateStat(t *testing.T, c *Controller, key string) GateStats {
	t.Helper()
	s, ok := gateOf(c, key)
	if !ok {
		t.Fatalf("gate %q not found", key)
	}
	return s
}

// waitQueued waits until n waiters are parked on gate key.
func waitQueued(t *testing.T, c *Controller, key string, n int) {
	t.Helper()
	waitFor(t, "queued on "+key, func() bool {
		s, ok := gateOf(c, key)
		return ok && s.Queued == n
	})
}

// recv returns the result from ch, failing the test if none arrives in 5 s.
func recv(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no result within 5s")
		return result{}
	}
}

// pending fails the test if ch already holds a result.
func pending(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: got a result (err %v), want it still waiting", what, r.err)
	default:
	}
}
