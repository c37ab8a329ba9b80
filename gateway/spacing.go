package gateway

import (
	"time"

	"golang.org/x/time/rate"
)

// The rpm/minTime dispatch spacing of a connection in this process: a
// rate.Limiter with burst 1 in connRate, on the real clock.

// setSpacing installs the dispatch spacing d, keeping the limiter's state
// when there already is one, so a changed rpm takes effect at once without
// granting a free burst.
func (r *connRate) setSpacing(d time.Duration, now time.Time) {
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

// turnDelay is how long a dispatch reserved now would wait for its turn.
func (r *connRate) turnDelay(now time.Time) time.Duration {
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

// takeTurn waits for c's dispatch turn on the in-process spacing while x
// holds its permit (spacedTurn); a turn that cannot come in time is
// answered with 429 RATE_LIMIT_RPM at once.
func (r *connRate) takeTurn(x *exchange, c *conn, start time.Time, maxWait time.Duration) *apiError {
	switch d, v := r.spacedTurn(x, start, maxWait); v {
	case turnTooLate:
		return x.errTurnTooLate(c, d, maxWait, "")
	case turnGone:
		return errClientGone
	}
	return nil
}

// turnVerdict is how a wait for a dispatch turn ended.
type turnVerdict uint8

const (
	turnTaken   turnVerdict = iota // the turn has come (or there is no spacing)
	turnTooLate                    // it would come after the wait bound: given back
	turnGone                       // the client went away while waiting: given back
)

// spacedTurn reserves r's next dispatch turn and waits for it while x holds
// its permit: a connection's or a client key's. The wait shares the
// request's admission deadline: start is when the admission wait began and
// maxWait its bound (0 = none). A turn that cannot come in time is given
// back at once, with d the time it would have taken.
func (r *connRate) spacedTurn(x *exchange, start time.Time, maxWait time.Duration) (d time.Duration, v turnVerdict) {
	lim := r.spacer.Load()
	if lim == nil {
		return 0, turnTaken
	}
	now := time.Now()
	res := lim.ReserveN(now, 1)
	if d = res.DelayFrom(now); d <= 0 {
		return 0, turnTaken
	}
	if maxWait > 0 && now.Add(d).After(start.Add(maxWait)) {
		res.CancelAt(now)
		return d, turnTooLate
	}
	if !x.waitTurn(now, d) {
		res.Cancel()
		return d, turnGone
	}
	return d, turnTaken
}

// waitTurn waits d from now for a reserved turn, counting the time as
// x's wait; it reports false when the client went away first.
func (x *exchange) waitTurn(now time.Time, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		x.waited += time.Since(now)
		return true
	case <-x.r.Context().Done():
		return false
	}
}
