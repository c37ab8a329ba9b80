package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// State is a connection's or client key's rate-limit state in this process.
// It outlives config snapshots: the gateway carries it over by id. Its
// methods are safe for concurrent use, but SetSpacing must not run
// concurrently with itself.
type State struct {
	spacer  atomic.Pointer[rate.Limiter] // nil when there is no spacing
	spacing time.Duration                // set by SetSpacing

	mu       sync.Mutex
	day      time.Time // UTC midnight the daily counts are for
	requests int64     // dispatched that day (store's count, or memory's)
	tokens   int64     // tokens that day
	// pendReq and pendTok were counted in memory while the usage store was
	// away; they are written with the next successful store call.
	pendReq, pendTok int64
	minute           time.Time // start of the current minute window
	used             int64     // tpm: tokens charged in the window, reservations of requests in flight included
	est              int64     // running estimate of tokens per request (known usages), 0 = none yet
	minuteReqs       int64     // dispatches in the window, for the rpm budget
	reserved         int64     // tpm and tpd tokens held by reservations not yet settled (reserve.go)

	shared sharedState // cluster mode: the cached shared state (shared.go)
}

// The rpm/minTime dispatch spacing in this process: a rate.Limiter with
// burst 1, on the real clock, since it is waited on with timers.

// SetSpacing installs the dispatch spacing d, keeping the limiter's state
// when there already is one, so a changed rpm takes effect at once without
// granting a free burst.
func (r *State) SetSpacing(d time.Duration, now time.Time) {
	if d == r.spacing && (d == 0) == (r.spacer.Load() == nil) {
		return
	}
	r.spacing = d
	lim := r.spacer.Load()
	switch {
	case d <= 0:
		r.spacer.Store(nil)
	case lim == nil:
		r.spacer.Store(rate.NewLimiter(rate.Every(d), 1))
	default:
		lim.SetLimitAt(now, rate.Every(d))
	}
}

// TurnDelay is how long a dispatch turn reserved now would wait.
func (r *State) TurnDelay(now time.Time) time.Duration {
	lim := r.spacer.Load()
	if lim == nil {
		return 0
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second))
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
}

// Turn reserves r's next dispatch turn and waits for it, ending early when
// ctx (the client's) is done. The wait shares the request's admission
// deadline: start is when the admission wait began and maxWait its bound
// (0 = none). A turn that cannot come in time is given back at once.
func (r *State) Turn(ctx context.Context, start time.Time, maxWait time.Duration) Turn {
	lim := r.spacer.Load()
	if lim == nil {
		return Turn{}
	}
	now := time.Now()
	res := lim.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d <= 0 {
		return Turn{}
	}
	if maxWait > 0 && now.Add(d).After(start.Add(maxWait)) {
		res.CancelAt(now)
		return Turn{Verdict: TurnTooLate, Wait: d}
	}
	waited, ok := waitTurn(ctx, now, d)
	if !ok {
		res.Cancel()
		return Turn{Verdict: TurnGone, Wait: d}
	}
	return Turn{Wait: d, Waited: waited}
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
