package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// The daily budgets (rpd, tpd) through a UsageCounter, exact across
// restarts and replicas, with memory as a cache and as the fallback while
// the store is away.

// usageTimeout bounds one call to the usage store.
const usageTimeout = 2 * time.Second

// usageRetry is how long the counts stay in memory only after the usage
// store failed, before the store is tried again.
const usageRetry = 5 * time.Second

// DayUsage is one connection's (or client key's) count for one UTC day.
type DayUsage struct {
	Requests int64
	Tokens   int64
}

// UsageCounter keeps the daily counts behind rpd and tpd, shared by every
// gateway replica (cmd adapts the store's usage_daily tables). Every method
// must be safe for concurrent use; day is any instant of the UTC day meant.
type UsageCounter interface {
	// CountRequest counts one request for id unless limit requests were
	// counted that day already, in one atomic step. It returns the day's
	// count after the call and whether this request was counted.
	CountRequest(ctx context.Context, id string, day time.Time, limit int64) (count int64, ok bool, err error)
	// AddUsage adds requests and tokens to id's day and returns the day's
	// totals after the addition.
	AddUsage(ctx context.Context, id string, day time.Time, requests, tokens int64) (DayUsage, error)
	// ReserveTokens adds tokens to id's day unless the day's tokens would
	// pass limit, in one atomic step. It returns the day's tokens after the
	// call and whether these were added. A reservation is settled with
	// AddUsage(0, actual − tokens).
	ReserveTokens(ctx context.Context, id string, day time.Time, tokens, limit int64) (total int64, ok bool, err error)
	// DayUsage returns every id's counts for the day; ids without usage
	// may be absent.
	DayUsage(ctx context.Context, day time.Time) (map[string]DayUsage, error)
}

// Days counts the daily budgets of States in UsageCounters, all behind one
// fail-open switch (they are one database): after a failure the stores are
// left alone for a while and the counts kept in memory, to be written with
// the next successful call.
type Days struct {
	down *failOpen
}

// NewDays returns a Days that logs to log, at most once a minute, that the
// usage store is unavailable.
func NewDays(log *slog.Logger) *Days {
	return &Days{down: &failOpen{log: log, retry: usageRetry,
		msg: "gateway: usage store unavailable; counting rpd/tpd in memory until it is back"}}
}

// Retry makes the next call ask the stores again, however recently they
// failed.
func (d *Days) Retry() { d.down.downUntil.Store(0) }

// Dispatch is the outcome of counting a dispatch against a daily budget.
type Dispatch uint8

const (
	DispatchOK      Dispatch = iota
	DispatchSkipped          // the budget is exhausted after all: try the next connection
	DispatchGone             // the client went away
)

// CountRequest takes one request of r's rpd budget (l.RPD > 0) in u under
// id, or in memory while u is away or nil (fail-open for the store, still
// enforced against what memory knows). ctx is the client's.
func (d *Days) CountRequest(ctx context.Context, u UsageCounter, id string, r *State, l *Limits, now time.Time) Dispatch {
	if u != nil && d.down.up() {
		cctx, cancel := context.WithTimeout(ctx, usageTimeout)
		count, ok, err := u.CountRequest(cctx, id, now, l.RPD)
		if err == nil {
			r.mu.Lock()
			r.rolloverLocked(l, now)
			r.requests = max(r.requests, count)
			pending := r.pendReq > 0 || r.pendTok > 0
			r.mu.Unlock()
			if pending {
				d.Flush(cctx, u, id, r, l, now, 0, 0)
			}
			cancel()
			if !ok {
				return DispatchSkipped
			}
			return DispatchOK
		}
		cancel()
		if ctx.Err() != nil {
			return DispatchGone
		}
		d.down.failed(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if r.requests >= l.RPD {
		return DispatchSkipped
	}
	r.requests++
	if u != nil {
		r.pendReq++
	}
	return DispatchOK
}

// Flush writes requests and tokens, plus whatever was counted in memory
// while the store was away, to u under id. On failure the amounts stay
// pending in r for the next call.
func (d *Days) Flush(ctx context.Context, u UsageCounter, id string, r *State, l *Limits, now time.Time, requests, tokens int64) {
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
	if u != nil && d.down.up() {
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
			d.down.failed(err)
		}
		return
	}
	r.requests = max(r.requests, tot.Requests+r.pendReq)
	r.tokens = max(r.tokens, tot.Tokens+r.pendTok)
}

var errUsageDown = errors.New("ratelimit: usage store marked unavailable")

// LoadDay raises the day's counts in r to the store's u, never lowering them.
func (r *State) LoadDay(l *Limits, now time.Time, u DayUsage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	r.requests = max(r.requests, u.Requests+r.pendReq)
	r.tokens = max(r.tokens, u.Tokens+r.pendTok)
}
