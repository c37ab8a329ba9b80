package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The daily budgets (rpd, tpd) through the UsageCounter, exact across
// restarts and replicas, with memory as a cache and as the fallback while
// the store is away.

// usageTimeout bounds one call to the usage store.
const usageTimeout = 2 * time.Second

// usageRetry is how long the gateway counts in memory only after the usage
// store failed, before it tries the store again.
const usageRetry = 5 * time.Second

// DayUsage is one connection's count for one UTC day.
type DayUsage struct {
	Requests int64
	Tokens   int64
}

// UsageCounter keeps the per-connection daily counts behind rpd and tpd,
// shared by every gateway replica (cmd adapts the store's usage_daily table).
// Every method must be safe for concurrent use; day is any instant of the
// UTC day meant.
type UsageCounter interface {
	// CountRequest counts one request for connID unless limit requests
	// were counted that day already, in one atomic step. It returns the
	// day's count after the call and whether this request was counted.
	CountRequest(ctx context.Context, connID string, day time.Time, limit int64) (count int64, ok bool, err error)
	// AddUsage adds requests and tokens to connID's day and returns the
	// day's totals after the addition.
	AddUsage(ctx context.Context, connID string, day time.Time, requests, tokens int64) (DayUsage, error)
	// DayUsage returns every connection's counts for the day, by
	// connection id; connections without usage may be absent.
	DayUsage(ctx context.Context, day time.Time) (map[string]DayUsage, error)
}

// LoadUsage reads the current UTC day's counts from the usage store into the
// in-memory budgets, so that remaining budgets are right after a restart and
// follow other replicas' traffic. It never lowers a count. cmd calls it after
// every config load. Without a usage store it does nothing.
func (g *Gateway) LoadUsage(ctx context.Context) error {
	s := g.state.Load()
	if g.usage == nil || s == nil {
		return nil
	}
	now := g.now()
	m, err := g.usage.DayUsage(ctx, now)
	if err != nil {
		return fmt.Errorf("gateway: load usage: %w", err)
	}
	for _, c := range s.conns {
		if u, ok := m[c.id]; ok {
			c.rate.loadDay(&c.lim, now, u)
		}
	}
	if g.keyUsage == nil {
		return nil
	}
	km, err := g.keyUsage.DayUsage(ctx, now)
	if err != nil {
		return fmt.Errorf("gateway: load client key usage: %w", err)
	}
	for _, ks := range s.keyOrder {
		if u, ok := km[ks.id]; ok {
			ks.carry.rate.loadDay(&ks.lim, now, u)
		}
	}
	return nil
}

// loadDay raises the day's counts in r to the store's u, never lowering them.
func (r *connRate) loadDay(l *connLimits, now time.Time, u DayUsage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	r.requests = max(r.requests, u.Requests+r.pendReq)
	r.tokens = max(r.tokens, u.Tokens+r.pendTok)
}

// usageUp reports whether the usage store should be asked: there is one,
// and it has not failed within usageRetry.
func (g *Gateway) usageUp() bool {
	return g.usage != nil && g.usageDown.up()
}

// countRequest takes one request of c's rpd budget.
func (x *exchange) countRequest(c *conn, now time.Time) dispatchVerdict {
	g, r, l := x.g, c.rate, &c.lim
	if g.usageUp() {
		ctx, cancel := context.WithTimeout(x.r.Context(), usageTimeout)
		count, ok, err := g.usage.CountRequest(ctx, c.id, now, l.rpd)
		if err == nil {
			r.mu.Lock()
			r.rolloverLocked(l, now)
			r.requests = max(r.requests, count)
			pending := r.pendReq > 0 || r.pendTok > 0
			r.mu.Unlock()
			if pending {
				g.flushUsage(ctx, c, now, 0, 0)
			}
			cancel()
			if !ok {
				return dispatchSkipped
			}
			return dispatchOK
		}
		cancel()
		if x.r.Context().Err() != nil {
			return dispatchGone
		}
		g.usageDown.failed(err)
	}
	// No store, or it is away: count in memory (fail-open for the store,
	// still enforced against what memory knows).
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if r.requests >= l.rpd {
		return dispatchSkipped
	}
	r.requests++
	if g.usage != nil {
		r.pendReq++
	}
	return dispatchOK
}

// flushUsage writes requests and tokens, plus whatever was counted in
// memory while the store was away, to the usage store. On failure the
// amounts stay pending for the next call.
func (g *Gateway) flushUsage(ctx context.Context, c *conn, now time.Time, requests, tokens int64) {
	g.flushUsageOf(ctx, g.usage, c.id, c.rate, &c.lim, now, requests, tokens)
}

// contextWithUsageTimeout bounds one write of spent tokens: it runs even if
// the client has gone, since the tokens were spent all the same.
func contextWithUsageTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), usageTimeout)
}

// flushUsageOf is flushUsage for the rate state r (limits l) kept under id
// in the store u: a connection's in Usage, a client key's in KeyUsage. Both
// stores share one fail-open switch (they are one database).
func (g *Gateway) flushUsageOf(ctx context.Context, u UsageCounter, id string, r *connRate, l *connLimits,
	now time.Time, requests, tokens int64) {
	r.mu.Lock()
	r.rolloverLocked(l, now)
	day := r.day
	requests += r.pendReq
	tokens += r.pendTok
	r.pendReq, r.pendTok = 0, 0
	r.mu.Unlock()
	if requests == 0 && tokens == 0 {
		return
	}
	var (
		tot DayUsage
		err error
	)
	if u != nil && g.usageDown.up() {
		tot, err = u.AddUsage(ctx, id, now, requests, tokens)
	} else {
		err = errUsageDown
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.day.Equal(day) {
		return // a new day began meanwhile; yesterday's leftovers are dropped
	}
	if err != nil {
		r.pendReq += requests
		r.pendTok += tokens
		if err != errUsageDown {
			g.usageDown.failed(err)
		}
		return
	}
	r.requests = max(r.requests, tot.Requests+r.pendReq)
	r.tokens = max(r.tokens, tot.Tokens+r.pendTok)
}

var errUsageDown = errors.New("gateway: usage store marked unavailable")
