package gateway

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// Rate limits per connection (package ratelimit keeps them, and its doc says
// why they work as they do):
//
//   - rpm and minTime are one dispatch spacing, the stricter of the two. A
//     request takes its concurrency permit, then waits for its turn; when
//     the turn would come after the request's maxWait deadline (shared with
//     the permit wait) the turn is given back and the client gets 429
//     RATE_LIMIT_RPM.
//   - rpd and tpd count per UTC day. A UsageCounter (Postgres) is the
//     source of truth: one conditional upsert per dispatched request when
//     rpd is set, tokens added after the response when tpd is set. Memory
//     holds a cache of the day's counts, used to skip exhausted connections.
//   - tpm is a per-minute window in memory. A dispatch reserves the
//     connection's running estimate of tokens per request; the usage the
//     upstream reports replaces the estimate. The window may go into debt,
//     which carries over to the next minutes.
//
// The spacing, the tpm window, and in cluster mode the shared side of
// cooldowns and suspensions, are kept by the gateway's limiter (limiter.go):
// ratelimit.Local, or ratelimit.Shared with Options.SharedLimits. Days and
// minute windows follow Options.Now.

// Error codes of the rate limits.
const (
	CodeRateLimitRPM = ratelimit.CodeRPM
	CodeRateLimitRPD = ratelimit.CodeRPD
	CodeRateLimitTPM = ratelimit.CodeTPM
	CodeRateLimitTPD = ratelimit.CodeTPD
	// CodeBudgetExceeded: a client key's money budget is spent.
	CodeBudgetExceeded = ratelimit.CodeBudget
)

// DayUsage is one connection's (or client key's) count for one UTC day.
type DayUsage = ratelimit.DayUsage

// UsageCounter keeps the daily counts behind rpd and tpd, shared by every
// gateway replica (cmd adapts the store's usage_daily tables).
type UsageCounter = ratelimit.UsageCounter

// applyRates gives every connection of s its rate state, carried over by
// id, with the new spacing in force. g.applyMu must be held.
func (g *Gateway) applyRates(s *state) {
	now := time.Now()
	seen := make(map[string]bool, len(s.conns))
	for _, c := range s.conns {
		r := g.rates[c.id]
		if r == nil {
			r = &ratelimit.State{}
			g.rates[c.id] = r
		}
		r.SetSpacing(c.lim.Spacing, now)
		c.rate = r
		seen[c.id] = true
	}
	for id := range g.rates {
		if !seen[id] {
			delete(g.rates, id)
		}
	}
}

// rateError is the 429 for a budget that left no candidate.
func (x *exchange) rateError(b ratelimit.Block, retry time.Duration) *apiError {
	budget, what := b.Budget()
	x.g.metrics.RateRejected(budget)
	return &apiError{Status: http.StatusTooManyRequests, Code: b.Code,
		Message: "every connection serving " + x.info.Model + " is out of its rate-limit budget or cooling down; " +
			"the " + what + " budget of gate " + b.Gate + " resets at " + b.Until.UTC().Format(time.RFC3339),
		RetryAfter: ceilSeconds(retry), Gate: b.Gate}
}

// errTurnTooLate is the 429 RATE_LIMIT_RPM for a dispatch turn on c that
// comes d from now, after the request's wait bound maxWait; where says
// whose spacing it is ("" or " across all replicas").
func (x *exchange) errTurnTooLate(c *conn, d, maxWait time.Duration, where string) *apiError {
	x.g.metrics.RateRejected(live.BudgetRPM)
	return &apiError{Status: http.StatusTooManyRequests, Code: CodeRateLimitRPM,
		Message: "connection " + c.label + " dispatches at most one request every " + c.lim.Spacing.String() +
			" (rpm/minTime)" + where + ", and the next turn comes after the wait bound of " + maxWait.String(),
		RetryAfter: ceilSeconds(d), Gate: c.lim.SpacingGate}
}

// countDispatch counts the request that is about to go to c upstream: rpd
// in the usage store (memory while it is away) and the rpm display count.
// Its tokens are reserved beforehand (reserve.go).
func (x *exchange) countDispatch(c *conn) ratelimit.Dispatch {
	l := &c.lim
	now := x.g.now()
	if l.RPD > 0 {
		v, err := x.g.days.CountRequest(x.r.Context(), x.g.usage, c.id, c.rate, l, now)
		if v != ratelimit.DispatchOK {
			x.budgetErr = err
			return v
		}
	}
	c.rate.CountDispatch(l, now)
	return ratelimit.DispatchOK
}

// FlushUsage writes what was counted in memory while the usage store was
// away — every connection's and key's day counts and money, each into the
// rows of the day it was counted on — unless the store is still away (then
// it stays pending). LoadUsage calls it first, so a connection or key that
// gets no request after the store returns still reaches its rows.
func (g *Gateway) FlushUsage(ctx context.Context) {
	s := g.state.Load()
	if s == nil {
		return
	}
	now := g.now()
	if g.usage != nil {
		for _, c := range s.conns {
			if c.rate.Pending() {
				g.days.Flush(ctx, g.usage, c.id, c.rate, &c.lim, now, 0, 0)
			}
		}
	}
	if g.keyUsage == nil {
		return
	}
	sc, _ := g.keyUsage.(ratelimit.SpendCounter)
	for _, ks := range s.keyOrder {
		r := &ks.Carry.Rate
		if !r.Pending() {
			continue
		}
		g.days.Flush(ctx, g.keyUsage, ks.ID, r, &ks.Lim, now, 0, 0)
		if sc != nil {
			g.days.FlushSpend(ctx, sc, ks.ID, r, now)
		}
	}
}

// LoadUsage reads the current UTC day's counts from the usage store into the
// in-memory budgets, so that remaining budgets are right after a restart and
// follow other replicas' traffic. It never lowers a count. cmd calls it after
// every config load. Without a usage store it does nothing.
func (g *Gateway) LoadUsage(ctx context.Context) error {
	g.FlushUsage(ctx)
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
			c.rate.LoadDay(&c.lim, now, u)
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
		if u, ok := km[ks.ID]; ok {
			ks.Carry.Rate.LoadDay(&ks.Lim, now, u)
		}
	}
	return nil
}
