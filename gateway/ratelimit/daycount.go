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
// switch (they are one database): after the store is found unreachable it
// is left alone for a while and the counts kept in memory, to be written
// into their own day's rows with the next successful call. Only an
// unreachable store flips the switch (storeAway): a statement the store
// refuses fails that one request, and a settlement of a deleted connection
// or key is dropped quietly.
type Days struct {
	down *failOpen
	log  *slog.Logger
	// closed: while the store is away, the day and money budgets refuse
	// (DispatchUnavailable) instead of counting in memory — cluster mode,
	// where replicas cannot see each other's memory.
	closed bool
}

// NewDays returns a Days that logs to log, at most once a minute, that the
// usage store is unavailable.
func NewDays(log *slog.Logger) *Days {
	return &Days{log: log, down: &failOpen{log: log, retry: usageRetry,
		msg: "gateway: usage store unavailable; counting rpd/tpd and money budgets in memory until it is back"}}
}

// FailClosed makes d refuse the day and money budgets of a State with a
// store while that store is away (DispatchUnavailable), rather than count
// them in memory: for replicas that share the store and not their memory.
// It returns d; call it at wiring, before d is used.
func (d *Days) FailClosed() *Days {
	d.closed = true
	d.down.msg = "gateway: usage store unavailable; day and money budgets refuse requests until it is back"
	return d
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
	// DispatchFailed: the store refused the statement (a constraint, a
	// range, an unknown id): this one request fails, the store stays in use.
	DispatchFailed
	// DispatchUnavailable: the store is away and d fails closed.
	DispatchUnavailable
)

// dayPend is what was counted in memory for one earlier UTC day while the
// store was away, still to be written into that day's row.
type dayPend struct {
	day      time.Time
	req, tok int64
}

// settleFailed handles err from writing a settlement or pending counts:
// an unreachable store flips the switch and a cancelled call does not (the
// caller keeps the amounts pending either way), an unknown id is dropped
// quietly (its row went with it), and anything else is logged and dropped.
// It reports whether to keep the amounts pending.
func (d *Days) settleFailed(err error) (keep bool) {
	switch {
	case storeAway(err):
		d.down.failed(err)
		return true
	case errors.Is(err, context.Canceled):
		return true // the caller's going, not the store's failing: kept for the next call
	case errors.Is(err, ErrUnknownID):
		return false
	}
	d.log.Error("gateway: usage store refused a settlement; its amount is dropped", slog.Any("error", err))
	return false
}

// CountRequest takes one request of r's rpd budget (l.RPD > 0) in u under
// id, or in memory while u is away or nil (fail-open for the store, still
// enforced against what memory knows; DispatchUnavailable when d fails
// closed). ctx is the client's. The error is the store's, with
// DispatchFailed.
func (d *Days) CountRequest(ctx context.Context, u UsageCounter, id string, r *State, l *Limits, now time.Time) (Dispatch, error) {
	if u != nil && d.down.up() {
		cctx, cancel := context.WithTimeout(ctx, usageTimeout)
		count, ok, err := u.CountRequest(cctx, id, now, l.RPD)
		if err == nil {
			r.mu.Lock()
			r.rolloverLocked(l, now)
			r.requests = max(r.requests, count)
			pending := r.pendingLocked()
			r.mu.Unlock()
			cancel()
			if pending {
				// Not cut short by the client leaving: the amounts are owed.
				fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), usageTimeout)
				d.Flush(fctx, u, id, r, l, now, 0, 0)
				fcancel()
			}
			if !ok {
				return DispatchSkipped, nil
			}
			return DispatchOK, nil
		}
		cancel()
		if ctx.Err() != nil {
			return DispatchGone, nil
		}
		if !storeAway(err) {
			return DispatchFailed, err
		}
		d.down.failed(err)
	}
	if u != nil && d.closed {
		return DispatchUnavailable, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if r.requests >= l.RPD {
		return DispatchSkipped, nil
	}
	r.requests++
	if u != nil {
		r.pendReq++
	}
	return DispatchOK, nil
}

// Pending reports whether r holds counts made in memory while the store
// was away, not yet written to it (day counts or money).
func (r *State) Pending() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pendingLocked() || r.money.pend != 0 || len(r.money.carry) > 0
}

// pendingLocked reports whether r holds counts not yet written to its
// store. r.mu must be held.
func (r *State) pendingLocked() bool {
	return r.pendReq != 0 || r.pendTok != 0 || len(r.carry) > 0
}

// Flush writes requests and tokens, plus whatever was counted in memory
// while the store was away (earlier days' into their own rows), to u under
// id. While the store is away the amounts stay pending in r for the next
// call; a statement the store refuses drops them (logged).
func (d *Days) Flush(ctx context.Context, u UsageCounter, id string, r *State, l *Limits, now time.Time, requests, tokens int64) {
	r.mu.Lock()
	r.rolloverLocked(l, now)
	day := r.day
	requests = SatAdd(requests, r.pendReq)
	tokens = SatAdd(tokens, r.pendTok)
	r.pendReq, r.pendTok = 0, 0
	carry := r.carry
	r.carry = nil
	r.mu.Unlock()
	var keep []dayPend
	up := u != nil && d.down.up()
	for _, c := range carry {
		if !up {
			keep = append(keep, c)
			continue
		}
		if _, err := u.AddUsage(ctx, id, c.day, c.req, c.tok); err != nil && d.settleFailed(err) {
			keep = append(keep, c)
			up = false
		}
	}
	var (
		tot DayUsage
		err error
	)
	switch {
	case requests == 0 && tokens == 0:
	case up:
		tot, err = u.AddUsage(ctx, id, day, requests, tokens)
	default:
		err = errUsageDown
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.carry = append(r.carry, keep...)
	if requests == 0 && tokens == 0 {
		return
	}
	if err != nil {
		if err == errUsageDown || d.settleFailed(err) {
			if r.day.Equal(day) {
				r.pendReq = SatAdd(r.pendReq, requests)
				r.pendTok = SatAdd(r.pendTok, tokens)
			} else {
				r.carry = append(r.carry, dayPend{day: day, req: requests, tok: tokens})
			}
		}
		return
	}
	if !r.day.Equal(day) {
		return
	}
	r.requests = max(r.requests, SatAdd(tot.Requests, r.pendReq))
	r.tokens = max(r.tokens, SatAdd(tot.Tokens, r.pendTok))
}

var errUsageDown = errors.New("ratelimit: usage store marked unavailable")

// LoadDay raises the day's counts in r to the store's u, never lowering them.
func (r *State) LoadDay(l *Limits, now time.Time, u DayUsage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	r.requests = max(r.requests, SatAdd(u.Requests, r.pendReq))
	r.tokens = max(r.tokens, SatAdd(u.Tokens, r.pendTok))
}
