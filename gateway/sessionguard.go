package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// Runaway guards in the request flow (DESIGN.md, "Runaway guards";
// gateway/session's doc, "Runaway guards"): a request with a session enters
// the session guard after its key's budgets are checked and before it
// queues for its connection — refused there 403 when the session is
// stopped, looping or over budget, or waiting for a slot under the
// session's sessionMaxConcurrent (429 SEMAPHORE_TIMEOUT at gate
// session:<session> when none comes within the wait bound); right before
// dispatch its estimated cost is reserved against sessionBudgetUsd, beside
// the key's money budgets, and settled with them.

// Error codes of the runaway guards (403: SDKs and agents do not retry it).
const (
	CodeSessionBudget  = "SESSION_BUDGET_EXCEEDED"
	CodeLoopDetected   = "LOOP_DETECTED"
	CodeSessionStopped = "SESSION_STOPPED"
)

// sessionGuards is the gateway's session guard and its metric.
type sessionGuards struct {
	*session.Guard
	// refused counts gatehouse_session_guard_total by session.Outcome.
	total   *prometheus.CounterVec
	refused [session.Gone + 1]prometheus.Counter
	// shared is the replicas' shared spend (cluster mode), nil in one
	// process; sharedErrAt when its latest failure was logged (unix nanos).
	shared      session.Shared
	sharedErrAt atomic.Int64
	// stops shares operators' stops (cluster mode), nil when shared does
	// not; view is the latest copy read, refreshing set while one request
	// reads it.
	stops      session.SharedStops
	view       atomic.Pointer[stopsView]
	refreshing atomic.Bool
}

// stopsView is the shared stops as read at at.
type stopsView struct {
	at  time.Time
	set map[string]bool
}

// sharedStopped reports whether the shared stops name session id, and
// whether they could be read; the first request after StopsRefresh reads
// them again, the others use the copy.
func (sg *sessionGuards) sharedStopped(x *exchange, id string) (stopped, known bool) {
	v := sg.view.Load()
	now := time.Now()
	if (v == nil || now.Sub(v.at) >= session.StopsRefresh) && sg.refreshing.CompareAndSwap(false, true) {
		set, err := sg.stops.Stops(x.r.Context())
		if err == nil {
			v = &stopsView{at: now, set: set}
			sg.view.Store(v)
		} else if x.r.Context().Err() == nil {
			sg.logShared(x.g, err)
		}
		sg.refreshing.Store(false)
	}
	if v == nil {
		return false, false
	}
	return v.set[id], true
}

func newSessionGuards(now func() time.Time) *sessionGuards {
	sg := &sessionGuards{Guard: session.NewGuard(now), total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_session_guard_total",
		Help: "Requests a runaway guard refused, by reason (stopped, loop, budget, concurrency).",
	}, []string{"reason"})}
	for o := session.Stopped; o <= session.Timeout; o++ {
		sg.refused[o] = sg.total.WithLabelValues(o.Reason())
	}
	return sg
}

// Sessions is the gateway's session guard: the sessions it served lately,
// and their stop and resume (handlers' /api/v1/sessions and /sessions).
func (g *Gateway) Sessions() *session.Guard { return g.sessions.Guard }

// SessionTTL is the affinity TTL of the config in force (the hold of a
// guard's refusal), DefaultAffinityTTLMs before the first.
func (g *Gateway) SessionTTL() time.Duration {
	if s := g.state.Load(); s != nil {
		return time.Duration(s.eff.AffinityTTLMs) * time.Millisecond
	}
	return limits.DefaultAffinityTTLMs * time.Millisecond
}

// sessionHold is what an exchange holds at the session guard.
type sessionHold struct {
	e *session.Entry
	// budget is the session's budget (micro-dollars, 0 = none); resv what
	// the attempt in flight holds of it.
	budget, resv int64
	// held: the attempt in flight reserved resv; shared: in the replicas'
	// shared count too.
	held, shared bool
}

// sessionLimits are the runaway guards of x's key: its own, else the
// settings' defaults.
func (x *exchange) sessionLimits() session.Limits {
	own, eff := &x.key.Own, &x.s.eff
	l := session.Limits{
		MaxConcurrent: eff.SessionMaxConcurrent, BudgetMicros: int64(eff.SessionBudgetUSD),
		LoopLimit: eff.LoopLimit, LoopWindow: time.Duration(eff.LoopWindowMs) * time.Millisecond,
	}
	if own.SessionMaxConcurrent != nil {
		l.MaxConcurrent = *own.SessionMaxConcurrent
	}
	if own.SessionBudgetUSD != nil {
		l.BudgetMicros = int64(*own.SessionBudgetUSD)
	}
	if own.LoopLimit != nil {
		l.LoopLimit = *own.LoopLimit
	}
	if own.LoopWindowMs != nil {
		l.LoopWindow = time.Duration(*own.LoopWindowMs) * time.Millisecond
	}
	return l
}

// enterSession takes x to its session's guard; nil when it may go on.
// A request without a session passes untouched. A Gemini request has a
// session only by the X-Gatehouse-Session family of headers (its body is
// not scanned), and no loop fingerprint.
func (x *exchange) enterSession() *apiError {
	if x.aff.session == "" && x.st == wire.Gemini && x.key != nil {
		x.aff.session = session.Hash(x.key.ID, session.ID(x.r.Header, "", ""))
	}
	if x.aff.session == "" || x.rt.Free() {
		return nil
	}
	ks := x.key
	req := session.Request{KeyID: ks.ID, KeyName: ks.Name, Session: x.aff.session,
		Client: session.Product(x.r.UserAgent()), Limits: x.sessionLimits(),
		TTL: time.Duration(x.s.eff.AffinityTTLMs) * time.Millisecond}
	if req.Limits.LoopLimit > 0 && x.st != wire.Gemini {
		if prev, last := x.info.LastTwo(x.body.Raw); last != nil {
			req.Print, req.HasPrint = session.Fingerprint(prev, last), true
		}
	}
	if x.g.sessions.stops != nil {
		req.Stopped, req.SharedKnown = x.g.sessions.sharedStopped(x, x.aff.session)
	}
	if req.Limits.MaxConcurrent > 0 {
		req.MaxWait = ks.Eff.MaxWait()
		if req.MaxWait <= 0 {
			req.MaxWait = x.s.eff.DefaultMaxWait()
		}
	}
	e, o, waited := x.g.sessions.Enter(x.r.Context(), &req)
	x.waited += waited
	switch o {
	case session.OK:
		x.sg = sessionHold{e: e, budget: req.Limits.BudgetMicros}
		return nil
	case session.Gone:
		return errClientGone
	}
	x.g.sessions.refused[o].Inc()
	return x.errSession(o, req.Limits, req.MaxWait)
}

// errSession is the answer to a request its session's guard refused.
func (x *exchange) errSession(o session.Outcome, l session.Limits, maxWait time.Duration) *apiError {
	x.alertSession(o)
	s := x.aff.session
	switch o {
	case session.Stopped:
		return &apiError{Status: http.StatusForbidden, Code: CodeSessionStopped,
			Message: "session " + s + " was stopped by an operator; it is refused until resumed or idle for the affinity TTL"}
	case session.Looping:
		return &apiError{Status: http.StatusForbidden, Code: CodeLoopDetected,
			Message: "session " + s + " repeated the same turn in more than " + strconv.Itoa(l.LoopLimit) +
				" requests within " + l.LoopWindow.String() + " (loopLimit); it is refused until resumed or idle for the affinity TTL"}
	case session.OverBudget:
		return &apiError{Status: http.StatusForbidden, Code: CodeSessionBudget,
			Message: "session " + s + " has too little of its USD budget ($" + limits.Micros(l.BudgetMicros).String() +
				", sessionBudgetUsd) left for this request; it is refused until resumed or idle for the affinity TTL"}
	}
	return &apiError{Status: http.StatusTooManyRequests, Code: "SEMAPHORE_TIMEOUT", Gate: "session:" + s,
		RetryAfter: 1, Message: "no slot of session " + s + "'s sessionMaxConcurrent " + strconv.Itoa(l.MaxConcurrent) +
			" came free within " + maxWait.String() + " (gate session:" + s + ")"}
}

// reserveSession reserves the attempt's estimated cost on c's prices
// against the session's budget; false (x answered 403) when it does not fit.
func (x *exchange) reserveSession() bool {
	if x.sg.budget <= 0 || x.sg.e == nil {
		return true
	}
	in, out := x.estimateParts()
	cost := ratelimit.EstimateCost(x.cur.t.rate, in, out)
	if sh := x.g.sessions.shared; sh != nil {
		ok, err := sh.ReserveSpend(x.r.Context(), x.aff.session, cost, x.sg.budget, x.sessionTTL())
		if err == nil {
			if !ok {
				x.sg.e.MarkOverBudget()
				x.g.sessions.refused[session.OverBudget].Inc()
				x.fail(x.errSession(session.OverBudget, session.Limits{BudgetMicros: x.sg.budget}, 0))
				return false
			}
			x.sg.e.Hold(cost)
			x.sg.resv, x.sg.held, x.sg.shared = cost, true, true
			return true
		}
		x.g.sessions.logShared(x.g, err) // this replica's own count decides
	}
	if !x.sg.e.Reserve(cost, x.sg.budget) {
		x.g.sessions.refused[session.OverBudget].Inc()
		x.fail(x.errSession(session.OverBudget, session.Limits{BudgetMicros: x.sg.budget}, 0))
		return false
	}
	x.sg.resv, x.sg.held = cost, true
	return true
}

// settleSession settles the session's reservation with what the attempt
// cost (u, as the key's budgets are settled).
func (x *exchange) settleSession(u ratelimit.Usage) {
	if !x.sg.held {
		return
	}
	if x.sg.shared && u.Known && u.Cost != x.sg.resv {
		err := x.g.sessions.shared.AddSpend(context.WithoutCancel(x.r.Context()), x.aff.session, u.Cost-x.sg.resv, x.sessionTTL())
		if err != nil {
			x.g.sessions.logShared(x.g, err)
		}
	}
	x.sg.e.Settle(x.sg.resv, u.Cost, u.Known)
	x.sg.resv, x.sg.held, x.sg.shared = 0, false, false
}

// leaveSession gives back the session's slot and adds the request's
// tokens and cost to its figures.
func (x *exchange) leaveSession() {
	e := x.sg.e
	if e == nil {
		return
	}
	x.sg.e = nil
	conn := ""
	if x.logT != nil {
		conn = x.logT.c.name
	}
	e.Account(x.tokensIn, x.tokensOut, x.tokensCached, x.costMicros, conn)
	e.Leave()
}

// ListSessions returns the sessions this replica served within the last 15
// minutes, most recent first (handlers.SessionSource).
func (g *Gateway) ListSessions() []session.Info { return g.sessions.List(g.SessionTTL()) }

// GetSession returns one session this replica knows.
func (g *Gateway) GetSession(id string) (session.Info, bool) {
	return g.sessions.Get(id, g.SessionTTL())
}

// StopSession stops a session: its next requests are refused 403
// SESSION_STOPPED until it is resumed or idle for the affinity TTL (in
// cluster mode on every replica, within session.StopsRefresh; there the
// stop lapses the affinity TTL after it was made).
func (g *Gateway) StopSession(id string) (session.Info, bool) {
	in, ok := g.sessions.Stop(id)
	if ok && g.sessions.stops != nil {
		if err := g.sessions.stops.SetStop(context.Background(), id, true, g.SessionTTL()); err != nil {
			g.sessions.logShared(g, err)
		}
	}
	return in, ok
}

// ResumeSession lets a stopped, looping or over-budget session go on (in
// cluster mode its shared spend starts over too).
func (g *Gateway) ResumeSession(id string) (session.Info, bool) {
	in, ok := g.sessions.Resume(id)
	if ok && g.sessions.shared != nil {
		if err := g.sessions.shared.ResetSession(context.Background(), id); err != nil {
			g.sessions.logShared(g, err)
		}
	}
	if ok && g.sessions.stops != nil {
		if err := g.sessions.stops.SetStop(context.Background(), id, false, g.SessionTTL()); err != nil {
			g.sessions.logShared(g, err)
		}
	}
	return in, ok
}

// sessionTTL is the affinity TTL of x's config.
func (x *exchange) sessionTTL() time.Duration {
	return time.Duration(x.s.eff.AffinityTTLMs) * time.Millisecond
}

// logShared logs a failure of the shared session spend at most once a
// minute.
func (sg *sessionGuards) logShared(g *Gateway, err error) {
	now := time.Now().UnixNano()
	last := sg.sharedErrAt.Load()
	if now-last >= int64(time.Minute) && sg.sharedErrAt.CompareAndSwap(last, now) {
		g.log.Warn("gateway: the shared session spend failed; this replica counts sessions' budgets on its own meanwhile", slog.Any("error", err))
	}
}
