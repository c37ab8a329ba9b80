package gateway

import (
	"context"
	"time"
)

// limiter keeps the per-connection limits and upstream health that cluster
// mode shares between replicas: the rpm/minTime dispatch spacing, the tpm
// window, upstream cooldowns (429 per model, rate-limit headers for the whole
// connection) and suspensions (401/403). New chooses
// one for the gateway's life: localLimiter (this process), or with
// Options.SharedLimits a sharedLimiter (shared.go), which keeps the
// in-process state alongside and falls back to it while the store fails.
// The daily budgets (rpd, tpd) are not here: the UsageCounter makes them
// exact in either mode. The connection's in-process state (connRate,
// connHealth) stays in the connection; a limiter holds no per-connection
// state of its own. A client key's rpm spacing and tpm window go through it
// too (the key* methods), so cluster mode shares them like a connection's;
// their in-process state stays in the key's keyCarry.
type limiter interface {
	// check reports whether model on c may be tried at now, and if not why
	// and until when.
	check(ctx context.Context, c *conn, model string, now time.Time) (unavailable, time.Time)
	// blocked reports whether an exhausted budget keeps c out at now.
	blocked(ctx context.Context, c *conn, now time.Time) (rateBlock, bool)
	// turnDelay is how long a dispatch turn on c reserved at now (real
	// clock) would wait, as far as this replica knows.
	turnDelay(c *conn, now time.Time) time.Duration
	// takeTurn waits for c's dispatch turn while x holds its permit. The
	// wait shares the request's admission deadline: start is when the
	// admission wait began and maxWait its bound (0 = none). A turn that
	// cannot come in time is answered with 429 RATE_LIMIT_RPM at once; a
	// client that leaves gets errClientGone.
	takeTurn(x *exchange, c *conn, start time.Time, maxWait time.Duration) *apiError
	// addTokens charges tokens, already settled in c's in-process window,
	// to the window other replicas see.
	addTokens(ctx context.Context, c *conn, tokens int64)
	// coolDown puts model on c in cooldown after an upstream 429.
	coolDown(ctx context.Context, c *conn, model string, now time.Time, retryAfter time.Duration, reason string)
	// coolConnection puts every model on c in cooldown for d after the
	// upstream's rate-limit headers said the account is spent.
	coolConnection(ctx context.Context, c *conn, now time.Time, d time.Duration, reason string)
	// suspend takes c out of rotation for d after an upstream 401/403.
	suspend(ctx context.Context, c *conn, now time.Time, d time.Duration, reason string)
	// reset clears what other replicas see of connID's cooldowns and
	// suspension (the caller resets its connHealth); r is its rate state,
	// nil when unknown.
	reset(ctx context.Context, connID string, r *connRate)
	// keyTurn waits for client key ks's rpm dispatch turn while x holds
	// its permit, as takeTurn does for a connection.
	keyTurn(x *exchange, ks *keyState, start time.Time, maxWait time.Duration) *apiError
	// keyBlocked reports whether ks's tpm window or tpd budget keeps it out
	// at now.
	keyBlocked(ctx context.Context, ks *keyState, now time.Time) (rateBlock, bool)
	// addKeyTokens charges tokens, already settled in ks's in-process
	// window, to the window other replicas see.
	addKeyTokens(ctx context.Context, ks *keyState, tokens int64)
}

// localLimiter keeps every limit in this process.
type localLimiter struct{}

func (localLimiter) check(_ context.Context, c *conn, model string, now time.Time) (unavailable, time.Time) {
	return c.health.check(model, now)
}

func (localLimiter) blocked(_ context.Context, c *conn, now time.Time) (rateBlock, bool) {
	return c.rate.blocked(&c.lim, now)
}

func (localLimiter) turnDelay(c *conn, now time.Time) time.Duration { return c.rate.turnDelay(now) }

func (localLimiter) takeTurn(x *exchange, c *conn, start time.Time, maxWait time.Duration) *apiError {
	return c.rate.takeTurn(x, c, start, maxWait)
}

func (localLimiter) addTokens(context.Context, *conn, int64) {}

func (localLimiter) coolDown(_ context.Context, c *conn, model string, now time.Time, retryAfter time.Duration, reason string) {
	c.health.coolDown(model, now, retryAfter, reason)
}

func (localLimiter) coolConnection(_ context.Context, c *conn, now time.Time, d time.Duration, reason string) {
	c.health.coolConnection(now, d, reason)
}

func (localLimiter) suspend(_ context.Context, c *conn, now time.Time, d time.Duration, reason string) {
	c.health.suspend(now, d, reason)
}

func (localLimiter) reset(context.Context, string, *connRate) {}

func (localLimiter) keyTurn(x *exchange, ks *keyState, start time.Time, maxWait time.Duration) *apiError {
	switch d, v := ks.carry.rate.spacedTurn(x, start, maxWait); v {
	case turnTooLate:
		return x.errKeyTurnTooLate(ks, d, maxWait, "")
	case turnGone:
		return errClientGone
	}
	return nil
}

func (localLimiter) keyBlocked(_ context.Context, ks *keyState, now time.Time) (rateBlock, bool) {
	return ks.carry.rate.blocked(&ks.lim, now)
}

func (localLimiter) addKeyTokens(context.Context, *keyState, int64) {}
