package ratelimit

import (
	"context"
	"sync"
	"testing"
	"time"
)

// fakeTurnClock is a manual clock for dispatch turns: a wait advances it.
type fakeTurnClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeTurnClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeTurnClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeTurnClock) clock() *clock {
	return &clock{now: c.now, wait: func(_ context.Context, _ time.Time, d time.Duration) (time.Duration, bool) {
		c.advance(d)
		return d, true
	}}
}

// spaced is a State with spacing d on clk.
func spaced(clk *fakeTurnClock, d time.Duration) *State {
	r := &State{clk: clk.clock()}
	r.SetSpacing(d, clk.now())
	return r
}

// TestTurnsShareOneDeadline (issue 23 item 7), on a fake clock: a request
// with maxWait 150 ms waits 100 ms for connection a's turn, fails there and
// moves to b, whose turn is 100 ms away. With one deadline for the whole
// request (the gateway's dispatchTurn gives Turn the candidate's start less
// what the request waited before it) b's turn is too late: the total wait
// stays within 150 ms, where b's own start would have allowed 200 ms. The
// key's turn taken for b is given back, so the key's next request has it at
// once.
func TestTurnsShareOneDeadline(t *testing.T) {
	t.Parallel()
	clk := &fakeTurnClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	const maxWait = 150 * time.Millisecond
	key := spaced(clk, 10*time.Millisecond)
	a := spaced(clk, 100*time.Millisecond)
	b := spaced(clk, 200*time.Millisecond)
	a.Turn(t.Context(), clk.now(), 0) // other requests took a's and b's turns
	b.Turn(t.Context(), clk.now(), 0)
	t0 := clk.now()

	var waited time.Duration
	// Candidate a: admitted at once, its turns within maxWait of t0.
	start := t0.Add(-waited)
	kt := key.Turn(t.Context(), start, maxWait)
	ct := a.Turn(t.Context(), start, maxWait)
	if kt.Verdict != TurnTaken || ct.Verdict != TurnTaken || ct.Waited != 100*time.Millisecond {
		t.Fatalf("turns at a: key %+v, connection %+v; want both taken, a's after 100 ms", kt, ct)
	}
	waited += kt.Waited + ct.Waited
	// a fails; candidate b, admitted at once at t0 + 100 ms.
	start = clk.now().Add(-waited)
	kt = key.Turn(t.Context(), start, maxWait)
	if kt.Verdict != TurnTaken {
		t.Fatalf("key's turn at b: %+v, want taken", kt)
	}
	waited += kt.Waited
	ct = b.Turn(t.Context(), start, maxWait)
	if ct.Verdict != TurnTooLate {
		t.Errorf("b's turn %+v, want too late: it would end the request's wait at %v, past %v",
			ct, waited+ct.Wait, maxWait)
	}
	kt.GiveBack()
	if total := clk.now().Sub(t0); total > maxWait {
		t.Errorf("waited %v across the two candidates, want ≤ %v", total, maxWait)
	}
	if d := key.TurnDelay(clk.now()); d != 0 {
		t.Errorf("key's next turn %v away after giving back the unused one, want 0", d)
	}
	kt.GiveBack() // a second give-back does nothing
	if got := key.Turn(t.Context(), clk.now(), 0); got.Wait != 0 {
		t.Errorf("key's next turn waited %v, want 0 (the one given back)", got.Wait)
	}
	if d := key.TurnDelay(clk.now()); d != 10*time.Millisecond {
		t.Errorf("key's turn after that %v away, want the spacing 10 ms", d)
	}
}

// TestTurnGivenBackOnlyIfLatest: a turn is given back only while no later
// turn was taken (that one keeps its place; nothing is granted twice).
func TestTurnGivenBackOnlyIfLatest(t *testing.T) {
	t.Parallel()
	clk := &fakeTurnClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	r := spaced(clk, time.Second)
	first := r.Turn(t.Context(), clk.now(), 0)
	second := r.Turn(t.Context(), clk.now(), 0) // waits a second
	first.GiveBack()
	if d := r.TurnDelay(clk.now()); d != time.Second {
		t.Errorf("next turn %v away after giving back an earlier turn, want 1 s (the later one stands)", d)
	}
	second.GiveBack()
	if d := r.TurnDelay(clk.now()); d != 0 {
		t.Errorf("next turn %v away after giving back the latest, want 0", d)
	}
}
