package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// State is a connection's or client key's rate-limit state in this process.
// It outlives config snapshots: the gateway carries it over by id. Its
// methods are safe for concurrent use, but SetSpacing must not run
// concurrently with itself.
type State struct {
	spacer  atomic.Pointer[spacer] // nil when there is no spacing
	clk     *clock                 // nil: the real clock (tests set their own)
	spacing time.Duration          // set by SetSpacing

	mu       sync.Mutex
	day      time.Time // UTC midnight the daily counts are for
	requests int64     // dispatched that day (store's count, or memory's)
	tokens   int64     // tokens that day
	// pendReq and pendTok were counted in memory while the usage store was
	// away; they are written with the next successful store call.
	pendReq, pendTok int64
	// carry is what was counted in memory for earlier days while the
	// store was away, owed to those days' rows.
	carry      []dayPend
	minute     time.Time  // start of the current minute window
	used       int64      // tpm: tokens charged in the window, reservations of requests in flight included
	est        int64      // running estimate of tokens per request (known usages), 0 = none yet
	minuteReqs int64      // dispatches in the window, for the rpm budget
	reserved   int64      // tpm and tpd tokens held by reservations not yet settled (reserve.go)
	money      spendState // the money budgets (spend.go)

	shared sharedState // cluster mode: the cached shared state (shared.go)
}

// The rpm/minTime dispatch spacing in this process: the next free turn,
// one spacing after the last one taken (no burst after idle time either),
// on the real clock, since it is waited on with timers. A turn taken and
// then not used (its connection's turn came too late, the attempt was
// skipped, the client left) is given back while no later turn was taken.

// spacer is one State's dispatch spacing.
type spacer struct {
	mu    sync.Mutex
	every time.Duration
	next  time.Time // earliest start of the next turn; zero: at once
}

// clock is what Turn reads and waits on: the real clock, or a test's.
type clock struct {
	now  func() time.Time
	wait func(ctx context.Context, now time.Time, d time.Duration) (time.Duration, bool)
}

var realClock = &clock{now: time.Now, wait: waitTurn}

func (r *State) clock() *clock {
	if r.clk != nil {
		return r.clk
	}
	return realClock
}

// SetSpacing installs the dispatch spacing d, keeping the next turn's
// schedule when there already is one (moved by the change of spacing), so
// a changed rpm takes effect at once without granting a free turn.
func (r *State) SetSpacing(d time.Duration, now time.Time) {
	if d == r.spacing && (d == 0) == (r.spacer.Load() == nil) {
		return
	}
	r.spacing = d
	s := r.spacer.Load()
	switch {
	case d <= 0:
		r.spacer.Store(nil)
	case s == nil:
		r.spacer.Store(&spacer{every: d})
	default:
		s.mu.Lock()
		if !s.next.IsZero() {
			s.next = s.next.Add(d - s.every)
		}
		s.every = d
		s.mu.Unlock()
	}
}

// TurnDelay is how long a dispatch turn reserved now would wait.
func (r *State) TurnDelay(now time.Time) time.Duration {
	s := r.spacer.Load()
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.next.Sub(now), 0)
}

// Verdict is how a wait for a dispatch turn ended.
type Verdict uint8

const (
	TurnTaken   Verdict = iota // the turn has come (or there is no spacing)
	TurnTooLate                // it would come after the wait bound: given back
	TurnGone                   // the client went away while waiting
)

// Turn is the outcome of a wait for a dispatch turn.
type Turn struct {
	Verdict Verdict
	// Wait is the time the turn was away when reserved (TurnTooLate: the
	// time it would have taken).
	Wait time.Duration
	// Waited is the time spent waiting for a turn taken.
	Waited time.Duration
	// Shared says the turn was the store's, across all replicas.
	Shared bool

	sp   *spacer     // the in-process spacing a taken turn is of (GiveBack)
	at   time.Time   // when the turn started
	back *sharedTurn // a taken turn of the shared store (Shared.Turn)
}

// Held reports whether t is a taken turn not yet given back or used
// (cleared).
func (t *Turn) Held() bool { return t.sp != nil || t.back != nil }

// GiveBack returns a taken turn that was not used (no dispatch followed)
// to its spacing, when no later turn has been taken since; t holds nothing
// afterwards, so a second call does nothing. A turn of the shared store goes
// back to the store under the same rule (TurnReturner).
func (t *Turn) GiveBack() {
	s, at, back := t.sp, t.at, t.back
	*t = Turn{}
	if back != nil {
		back.giveBack()
		return
	}
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.next.Equal(at.Add(s.every)) {
		s.next = at
	}
	s.mu.Unlock()
}

// Turn reserves r's next dispatch turn and waits for it, ending early when
// ctx (the client's) is done. The wait shares the request's admission
// deadline: start is when the admission wait began and maxWait its bound
// (0 = none). A turn that cannot come in time is given back at once.
func (r *State) Turn(ctx context.Context, start time.Time, maxWait time.Duration) Turn {
	s := r.spacer.Load()
	if s == nil {
		return Turn{}
	}
	clk := r.clock()
	now := clk.now()
	s.mu.Lock()
	at := now
	if s.next.After(at) {
		at = s.next
	}
	d := at.Sub(now)
	if maxWait > 0 && at.After(start.Add(maxWait)) {
		s.mu.Unlock()
		return Turn{Verdict: TurnTooLate, Wait: d}
	}
	s.next = at.Add(s.every)
	s.mu.Unlock()
	t := Turn{Wait: d, sp: s, at: at}
	if d <= 0 {
		return t
	}
	waited, ok := clk.wait(ctx, now, d)
	if !ok {
		t.GiveBack()
		return Turn{Verdict: TurnGone, Wait: d}
	}
	t.Waited = waited
	return t
}

// waitTurn waits d from now for a reserved turn and returns the time it
// took; ok is false when ctx ended first.
func waitTurn(ctx context.Context, now time.Time, d time.Duration) (waited time.Duration, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return time.Since(now), true
	case <-ctx.Done():
		return 0, false
	}
}
