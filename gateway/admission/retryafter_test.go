package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWaitEstimatesCountWhoIsAhead checks that EstimateWait and the
// RetryAfter of a rejection count, at every full gate of the request's path,
// the waiters that need that gate (wherever they are parked), and divide by
// that same gate's cap: waiters of another model never lengthen the estimate
// for a model whose own gate is about to free, and waiters parked on an outer
// gate still count at the inner full gate they will need.
func TestWaitEstimatesCountWhoIsAhead(t *testing.T) {
	t.Parallel()
	const (
		kindEstimate = iota
		kindQueueFull
		kindTimeout
	)
	tests := []struct {
		name     string
		caps     map[string]int
		holds    [][]string // paths admitted at once and held
		parked   []string   // path of the waiters parked before the probe
		parkedN  int
		parkedOn string // the gate those waiters park on
		probe    []string
		depth    int // MaxQueueDepth of the probe
		kind     int
		want     time.Duration
	}{
		{
			name:  "queue full: other models' waiters do not count at a free-soon model gate",
			caps:  map[string]int{"connection:c1": 10, "model:c1:a": 1, "model:c1:b": 1},
			holds: [][]string{{"connection:c1", "model:c1:a"}, {"connection:c1", "model:c1:b"}},
			// three waiters for model b fill the connection's queue
			parked: []string{"connection:c1", "model:c1:b"}, parkedN: 3, parkedOn: "model:c1:b",
			probe: []string{"connection:c1", "model:c1:a"}, depth: 3, kind: kindQueueFull,
			// model a: nobody ahead, (0+1) × 1s ÷ 1
			want: time.Second,
		},
		{
			name:   "queue full: the queue gate itself is the blocker",
			caps:   map[string]int{"connection:c1": 2},
			holds:  [][]string{{"connection:c1"}, {"connection:c1"}},
			parked: []string{"connection:c1"}, parkedN: 3, parkedOn: "connection:c1",
			probe: []string{"connection:c1"}, depth: 3, kind: kindQueueFull,
			// (3+1) × 1s ÷ 2
			want: 2 * time.Second,
		},
		{
			name:   "timeout: waiters parked on the full global gate still need the connection",
			caps:   map[string]int{"global": 2, "connection:c1": 1},
			holds:  [][]string{{"global", "connection:c1"}, {"global", "connection:c2"}},
			parked: []string{"global", "connection:c1"}, parkedN: 3, parkedOn: "global",
			probe: []string{"global", "connection:c1"}, kind: kindTimeout,
			// global: (3+1) × 1s ÷ 2 = 2s; connection:c1: (3+1) × 1s ÷ 1 = 4s
			want: 4 * time.Second,
		},
		{
			name:   "estimate: waiters parked on the full global gate still need the connection",
			caps:   map[string]int{"global": 2, "connection:c1": 1},
			holds:  [][]string{{"global", "connection:c1"}, {"global", "connection:c2"}},
			parked: []string{"global", "connection:c1"}, parkedN: 3, parkedOn: "global",
			probe: []string{"global", "connection:c1"}, kind: kindEstimate,
			want: 4 * time.Second,
		},
		{
			name:  "estimate: whole path has room",
			caps:  map[string]int{"connection:c1": 2, "model:c1:a": 1},
			holds: [][]string{{"connection:c1", "model:c1:b"}},
			probe: []string{"connection:c1", "model:c1:a"}, kind: kindEstimate,
			want: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// No release is observed, so every gate assumes DefaultHold.
			c := New(Options{DefaultHold: time.Second})
			c.SetCaps(tt.caps)
			var held []*Permit
			for _, path := range tt.holds {
				held = append(held, mustAcquire(t, c, path...))
			}
			ctx, cancel := context.WithCancel(t.Context())
			var waiters []<-chan result
			for range tt.parkedN {
				waiters = append(waiters, acquireAsync(ctx, c, Request{Gates: refs(tt.parked...)}))
			}
			if tt.parkedN > 0 {
				waitQueued(t, c, tt.parkedOn, tt.parkedN)
			}
			probe := Request{Gates: refs(tt.probe...), MaxQueueDepth: tt.depth}
			var got time.Duration
			switch tt.kind {
			case kindEstimate:
				got = c.EstimateWait(probe)
			case kindQueueFull, kindTimeout:
				want := ErrQueueFull
				if tt.kind == kindTimeout {
					want = ErrTimeout
					probe.MaxWait = 10 * time.Millisecond
				}
				_, err := c.Acquire(t.Context(), probe)
				var ae *Error
				if !errors.As(err, &ae) || !errors.Is(err, want) {
					t.Fatalf("Acquire error = %v, want %v", err, want)
				}
				got = ae.RetryAfter
			}
			if got != tt.want {
				t.Errorf("estimate = %v, want %v", got, tt.want)
			}
			cancel()
			for _, w := range waiters {
				if r := recv(t, w); r.err == nil {
					r.p.Release()
				}
			}
			for _, p := range held {
				p.Release()
			}
		})
	}
}
