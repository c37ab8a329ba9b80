package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestEstimateWaitAndRetryAfter(t *testing.T) {
	t.Parallel()
	clk := &fakeClock{t: time.Unix(1000, 0)}
	c := New(Options{Now: clk.now})
	c.SetCaps(map[string]int{"connection:c1": 2})
	req := Request{Gates: refs("connection:c1")}
	if got := c.EstimateWait(req); got != 0 {
		t.Fatalf("EstimateWait on an idle gate = %v, want 0", got)
	}
	// Hold times of 4 s teach the gate its mean hold.
	for range 2 {
		p := mustAcquire(t, c, "connection:c1")
		clk.advance(4 * time.Second)
		p.Release()
	}
	a := mustAcquire(t, c, "connection:c1")
	b := mustAcquire(t, c, "connection:c1")
	// Nobody queued: (0+1) × 4s ÷ 2.
	if got := c.EstimateWait(req); got != 2*time.Second {
		t.Errorf("EstimateWait = %v, want 2s", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	w := acquireAsync(ctx, c, Request{Gates: refs("connection:c1")})
	waitQueued(t, c, "connection:c1", 1)
	if got := c.EstimateWait(req); got != 4*time.Second {
		t.Errorf("EstimateWait with one queued = %v, want 4s", got)
	}
	_, err := c.Acquire(t.Context(), Request{Gates: refs("connection:c1"), MaxQueueDepth: 1})
	var ae *Error
	if !errors.As(err, &ae) || ae.RetryAfter != 4*time.Second || ae.RetryAfterSeconds() != 4 {
		t.Errorf("queue full error %v, want RetryAfter 4s", err)
	}
	cancel()
	recv(t, w)
	a.Release()
	b.Release()
}

// TestEstimateWaitUsesDefaultHold: before any hold has been measured on a gate,
// the wait estimated for a full gate is the configured DefaultHold per waiter
// ahead; a DefaultHold of zero or less means one second.
func TestEstimateWaitUsesDefaultHold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		hold time.Duration
		want time.Duration
	}{
		{"configured", 5 * time.Second, 5 * time.Second},
		{"zero", 0, time.Second},
		{"negative", -time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := New(Options{DefaultHold: tc.hold})
			c.SetCaps(map[string]int{"connection:c1": 1})
			p := mustAcquire(t, c, "connection:c1")
			defer p.Release()
			if got := c.EstimateWait(Request{Gates: refs("connection:c1")}); got != tc.want {
				t.Errorf("EstimateWait with DefaultHold %v = %v, want %v", tc.hold, got, tc.want)
			}
		})
	}
}

// TestEstimateWaitFollowsMeasuredHolds: the hold time behind a wait estimate
// starts at the first measured hold and then moves an eighth of the way
// towards each new one: holds of 8 s then 16 s give 9 s per waiter ahead.
func TestEstimateWaitFollowsMeasuredHolds(t *testing.T) {
	r := newFairRig(t, map[string]int{fairGate: 1})
	r.submit("a", 1, fairPath...)
	r.submit("b", 1, fairPath...) // parked: its hold is measured from its admission
	r.clk.advance(8 * time.Second)
	r.releaseOldest() // a held 8 s; b admitted
	r.clk.advance(16 * time.Second)
	r.releaseOldest() // b held 16 s
	r.submit("c", 1, fairPath...)
	if got, want := r.c.EstimateWait(Request{Gates: refs(fairPath...)}), 9*time.Second; got != want {
		t.Errorf("EstimateWait after holds of 8 s and 16 s = %v, want %v", got, want)
	}
	r.releaseAll()
}
