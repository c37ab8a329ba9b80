package gateway

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// The windows of a connection's budgets in this process: the UTC day of
// rpd/tpd (a cache of the usage store's counts, daycount.go) and the tpm
// minute window with its debt; both follow Options.Now.

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// rolloverLocked starts a new day or minute window when now has reached
// it. Debt in the tpm window is paid off at tpm tokens per minute.
func (r *connRate) rolloverLocked(l *connLimits, now time.Time) {
	if day := utcDay(now); day.After(r.day) {
		r.day = day
		r.requests, r.tokens, r.pendReq, r.pendTok = 0, 0, 0, 0
	}
	m := now.UTC().Truncate(time.Minute)
	if !m.After(r.minute) {
		return
	}
	if !r.minute.IsZero() && l.tpm > 0 {
		k := int64(m.Sub(r.minute) / time.Minute)
		if r.used -= min(k, 1<<20) * l.tpm; r.used < 0 {
			r.used = 0
		}
	} else {
		r.used = 0
	}
	r.minute, r.minuteReqs = m, 0
}

// tpmRoom reports whether a window with used tokens has room for a request
// estimated at est: anything under the limit when nothing is known yet, and
// always one request in an empty window, whatever its estimate.
func tpmRoom(used, est, tpm int64) bool {
	return used <= 0 || (used < tpm && used+est <= tpm)
}

// tpmBlocked reports whether a tpm window with used tokens, ending at end,
// keeps out a request estimated at est, and until when: debt is paid off at
// tpm tokens per minute, for at most a day.
func tpmBlocked(l *connLimits, used, est int64, end time.Time) (rateBlock, bool) {
	if tpmRoom(used, est, l.tpm) {
		return rateBlock{}, false
	}
	k := int64(1)
	for ; k < 24*60; k++ {
		if tpmRoom(max(used-k*l.tpm, 0), est, l.tpm) {
			break
		}
	}
	return rateBlock{CodeRateLimitTPM, l.gateTPM, end.Add(time.Duration(k-1) * time.Minute)}, true
}

// dayBlockedLocked reports whether an exhausted daily budget keeps the
// connection out until midnight. r.mu must be held, rolled over to now.
func (r *connRate) dayBlockedLocked(l *connLimits) (rateBlock, bool) {
	midnight := r.day.AddDate(0, 0, 1)
	switch {
	case l.rpd > 0 && r.requests >= l.rpd:
		return rateBlock{CodeRateLimitRPD, l.gateRPD, midnight}, true
	case l.tpd > 0 && r.tokens >= l.tpd:
		return rateBlock{CodeRateLimitTPD, l.gateTPD, midnight}, true
	}
	return rateBlock{}, false
}

// blocked reports whether an exhausted budget keeps the connection out at now.
func (r *connRate) blocked(l *connLimits, now time.Time) (rateBlock, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if b, ok := r.dayBlockedLocked(l); ok {
		return b, true
	}
	if l.tpm > 0 {
		return tpmBlocked(l, r.used, r.est, r.minute.Add(time.Minute))
	}
	return rateBlock{}, false
}

// budgets reports the connection's windows for Snapshot; nil without any.
func (r *connRate) budgets(l *connLimits, now time.Time) map[string]live.Budget {
	if l.rpm == 0 && !l.budgeted() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	midnight := r.day.AddDate(0, 0, 1)
	next := r.minute.Add(time.Minute)
	m := make(map[string]live.Budget, 4)
	if l.rpm > 0 {
		m[live.BudgetRPM] = live.Budget{Limit: l.rpm, Remaining: max(l.rpm-r.minuteReqs, 0), ResetAt: next}
	}
	if l.rpd > 0 {
		m[live.BudgetRPD] = live.Budget{Limit: l.rpd, Remaining: max(l.rpd-r.requests, 0), ResetAt: midnight}
	}
	if l.tpm > 0 {
		m[live.BudgetTPM] = live.Budget{Limit: l.tpm, Remaining: l.tpm - r.used, ResetAt: next}
	}
	if l.tpd > 0 {
		m[live.BudgetTPD] = live.Budget{Limit: l.tpd, Remaining: max(l.tpd-r.tokens, 0), ResetAt: midnight}
	}
	return m
}

// dispatchVerdict is the outcome of counting a dispatch against the budgets.
type dispatchVerdict uint8

const (
	dispatchOK      dispatchVerdict = iota
	dispatchSkipped                 // a budget is exhausted after all: try the next connection
	dispatchGone                    // the client went away
)

// countDispatch counts the request that is about to go to c upstream: rpd
// in the usage store (memory while it is away), the rpm display count, and
// the tpm estimate, which it returns so that settle can replace it.
func (x *exchange) countDispatch(c *conn) (reserved int64, v dispatchVerdict) {
	l := &c.lim
	now := x.g.now()
	if l.rpd > 0 {
		if v := x.countRequest(c, now); v != dispatchOK {
			return 0, v
		}
	}
	return c.rate.reserveDispatch(l, now), dispatchOK
}

// reserveDispatch counts a dispatch in r's minute (the rpm display count)
// and, with tpm, reserves the running estimate of tokens per request, which
// it returns so that settle can replace it: a connection's or a client key's.
func (r *connRate) reserveDispatch(l *connLimits, now time.Time) (reserved int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	r.minuteReqs++
	if l.tpm > 0 {
		reserved = r.est
		r.used += reserved
		r.inflight += reserved
	}
	return reserved
}

// settle charges the tokens an attempt on c used (actual, 0 when the
// upstream reported none) in place of the estimate reserved at dispatch:
// to the tpm window, through the limiter, and to the day's tokens in the
// usage store.
func (x *exchange) settle(c *conn, reserved, actual int64) {
	l := &c.lim
	if !l.countsTokens() {
		return
	}
	g := x.g
	now := g.now()
	record := c.rate.settle(l, now, reserved, actual)
	if l.tpm > 0 {
		g.limiter.addTokens(x.r.Context(), c, actual)
	}
	if !record || g.usage == nil {
		return
	}
	// The tokens were spent even if the client has gone: write them anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.r.Context()), usageTimeout)
	defer cancel()
	g.flushUsage(ctx, c, now, 0, actual)
}

// settle is exchange.settle in memory: the tpm window, the running
// estimate and the day's tokens. It reports whether the tokens count
// towards tpd.
func (r *connRate) settle(l *connLimits, now time.Time, reserved, actual int64) (record bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if l.tpm > 0 {
		r.used = max(r.used+actual-reserved, 0)
		r.inflight -= reserved
	}
	if actual > 0 {
		if r.est == 0 {
			r.est = actual
		} else {
			r.est = (3*r.est + actual + 3) / 4
		}
	}
	record = l.tpd > 0 && actual > 0
	if record {
		r.tokens += actual
	}
	return record
}
