package gateway

import (
	"errors"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// pick is an admitted attempt: the target, its permit, and the breaker's
// outcome callback.
type pick struct {
	t      *target
	idx    int
	permit permit
	done   func(error)
}

// errClientGone ends an exchange whose client went away while it waited.
var errClientGone = &apiError{Status: StatusClientGone, Code: "CLIENT_GONE", Message: "client went away"}

// choose finds the connection for the next attempt and admits the request
// there, setting x.cur to the pick. Candidates are the targets not yet
// tried whose connection is healthy for the model. The first of them,
// highest priority first (equal priorities rotated so they share the load),
// that admits at once wins; when none can, the request queues on the one
// with the shortest expected wait, higher priority first among equals. A
// full queue moves on to the next; a timeout ends the request with 429.
//
// It leaves x.cur zero and returns an error to send when nothing can be
// tried:
// UPSTREAM_COOLDOWN when every candidate is cooling down (Retry-After the
// shortest cooldown), NO_HEALTHY_CONNECTION when none is healthy (suspended,
// breaker open, or cooling; Retry-After the earliest recovery), a
// RATE_LIMIT_* error when every candidate is out of its rpd/tpd/tpm budget
// or cooling (Retry-After the earliest reset) or when the admitted
// connection's dispatch turn (rpm/minTime) would come after the request's
// deadline, an admission error, CLUSTER_UNAVAILABLE when a shared admission
// controller runs fail-closed without its store, or nil when the healthy
// candidates have all been tried. Connections out of budget are skipped like cooling ones.
//
// Each step runs in a frame of its own below this small one, so the
// goroutine stack of a queued request can stay within 4 KiB (see queue).
//
// A request that queued re-checks its connection's health once admitted:
// when the connection answered 429 or 401/403 (or its breaker opened) while
// the request waited, the permit goes back and the choice starts over, so
// queued requests never reach an upstream that is cooling down or suspended.
func (x *exchange) choose() *apiError {
	x.cur = pick{}
	for range maxRechoose {
		if aerr := x.healthy(); x.cand.n == 0 {
			return aerr
		}
		if x.aff.follow && !x.aff.looked {
			if aerr, done := x.followBinding(); done {
				return aerr
			}
		}
		if x.aff.follow || x.g.windowsSeen.Load() {
			x.placeNew()
		}
		if aerr, ok := x.admitNow(); ok {
			return aerr
		}
		if aerr := x.queue(); aerr != errRechoose {
			return aerr
		}
	}
	return errNoHealthyNow(x.info.Model)
}

// maxRechoose bounds how often one choice starts over after its admitted
// connection turned out unhealthy.
const maxRechoose = 4

// errRechoose is queue's answer when a connection admitted the request but
// became unhealthy while it waited: choose starts over.
var errRechoose = &apiError{Status: http.StatusServiceUnavailable, Code: CodeNoHealthy}

// errNoHealthyNow is the 503 for a request whose candidates all turned
// unhealthy or busy probing while it was being placed; their state may
// change any moment, hence Retry-After 1. Not inlined, to keep its
// temporaries out of choose's frame.
//
//go:noinline
func errNoHealthyNow(model string) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Code: CodeNoHealthy,
		Message: "no healthy connection serves " + model + " right now", RetryAfter: 1}
}

// stillHealthy reports whether t may still be tried now (healthy and within
// its budgets): a request that waited for its permit checks again before
// dispatch.
func (x *exchange) stillHealthy(t *target) bool {
	now := x.g.now()
	why, _ := x.check(t.c, t.model, now)
	if why != health.Available {
		return false
	}
	if t.c.lim.Budgeted() {
		if _, blocked := x.budgetBlocked(t.c, now); blocked {
			return false
		}
	}
	return true
}

// candidates are the indices (into exchange.targets) of the healthy
// connections to try, in order.
type candidates struct {
	idx [maxCandidates]uint8
	n   int
}

// healthy sets x.cand to the untried candidates that are healthy for the
// model and within their budgets, highest priority first (equal priorities
// rotated), and when there are none returns the error to send (nil: all have
// been tried).
func (x *exchange) healthy() *apiError {
	x.cand.n = 0
	g := x.g
	now := g.now()
	n := len(x.targets)
	// Indices fit a byte (maxCandidates); small arrays keep the stack of a
	// queued request small.
	var orderBuf, healthyBuf [maxCandidates]uint8
	order := priorityOrder(orderBuf[:0], x.targets, targetPriority, g.rotate.Add(1))

	healthy := healthyBuf[:0]
	var coolFor, recoverIn, rateFor time.Duration
	var coolGate string
	var rateBlk ratelimit.Block
	nCooling, nOK, nRate := 0, 0, 0
	for _, i := range order {
		t := x.targets[i]
		why, until := x.check(t.c, t.model, now)
		var left time.Duration
		switch why {
		case health.Available:
			if x.tried&(1<<i) != 0 {
				nOK++
				continue
			}
			if t.c.lim.Budgeted() {
				if b, blocked := x.budgetBlocked(t.c, now); blocked {
					// Out of budget: skipped like a cooling connection.
					nRate++
					left = b.Until.Sub(now)
					if rateBlk.Code == "" || left < rateFor {
						rateFor, rateBlk = left, b
					}
					break
				}
			}
			nOK++
			healthy = append(healthy, i)
			continue
		case health.Cooling:
			nCooling++
			left = until.Sub(now)
			if coolGate == "" || left < coolFor {
				coolFor, coolGate = left, "cooldown:"+t.c.id+":"+t.model
			}
		case health.Suspended, health.Forbidden:
			left = until.Sub(now)
		case health.Breaker:
			left = time.Until(until)
		}
		if recoverIn == 0 || left < recoverIn {
			recoverIn = left
		}
	}
	if len(healthy) == 0 {
		switch {
		case nRate > 0 && nRate+nCooling == n:
			retry := rateFor
			if nCooling > 0 && coolFor < retry {
				retry = coolFor
			}
			return x.rateError(rateBlk, retry)
		case nCooling == n:
			return &apiError{Status: http.StatusTooManyRequests, Code: CodeUpstreamCooldown,
				Message:    "every connection serving " + x.info.Model + " is cooling down after upstream rate limits",
				RetryAfter: ceilSeconds(coolFor), Gate: coolGate}
		case nOK == 0:
			return &apiError{Status: http.StatusServiceUnavailable, Code: CodeNoHealthy,
				Message:    "no healthy connection serves " + x.info.Model + " right now",
				RetryAfter: ceilSeconds(recoverIn)}
		}
		return nil
	}
	x.cand.n = copy(x.cand.idx[:], healthy)
	return nil
}

// budgetBlocked reports whether an exhausted budget keeps c out at now:
// with shared limits the tpm window is the cluster's.
func (x *exchange) budgetBlocked(c *conn, now time.Time) (ratelimit.Block, bool) {
	return x.g.limiter.Blocked(x.r.Context(), c.id, &c.lim, c.rate, now)
}

// turnDelay is how long a dispatch turn on c reserved now would wait: with
// shared limits, as far as this replica knows.
func (x *exchange) turnDelay(c *conn) time.Duration {
	return x.g.limiter.TurnDelay(c.rate, time.Now())
}

// admitNow takes the first candidate that can admit and dispatch at once
// (the pick in x.cur); ok is false when none can.
func (x *exchange) admitNow() (aerr *apiError, ok bool) {
	g := x.g
	for _, i := range x.cand.idx[:x.cand.n] {
		t := x.targets[i]
		if t.c.lim.Spacing > 0 && x.turnDelay(t.c) > 0 {
			continue
		}
		start := time.Now()
		x.waitedBefore = x.waited
		permit, ok := x.tryAdmit(x.request(t))
		if !ok {
			continue
		}
		g.metrics.Attempts.Inc()
		g.metrics.WaitSeconds.Observe(0)
		if p, ok := x.admitted(t, int(i), permit); ok {
			x.cur, aerr = x.dispatchTurn(p, start)
			return aerr, true
		}
	}
	return nil, false
}

// queue waits for a permit on the candidate where the wait looks shortest,
// moving on to the next when a queue is full.
//
// queue, choose and run are the frames under admission's wait, so they hold
// as little as possible: the wait's state lives in the exchange (on the
// heap), its start is in waitRequest and what follows it in awaited. With
// them small, a request queued on a fresh connection keeps the 4 KiB
// goroutine stack net/http started it with, instead of 8 KiB for the whole
// wait (package doc, "Small frames under a queued request's wait").
func (x *exchange) queue() *apiError {
	x.orderByWait()
	x.qFull, x.qRechoose = nil, false
	for k := 0; k < x.cand.n; k++ {
		i := x.cand.idx[k]
		x.waitRequest(i)
		if c := x.g.local; c != nil && !x.slotUsed {
			// Into the exchange's own permit, as tryAdmit.
			if x.qErr = c.AcquireInto(x.r.Context(), x.qReq, &x.slot); x.qErr == nil {
				x.slotUsed = true
				x.qPermit = &x.slot
			}
		} else {
			x.awaitGrant()
		}
		if aerr, done := x.awaited(i); done {
			return aerr
		}
	}
	return x.queueEnd()
}

// awaitGrant is queue's wait through Options.Admission's Acquire: a permit of its
// own (a shared controller's lease, or a later admission of this exchange).
func (x *exchange) awaitGrant() {
	x.qPermit, x.qErr = x.g.ctrl.Acquire(x.r.Context(), x.qReq)
}

// waitRequest starts a wait on targets[i]: the admission request (x.qReq),
// its start and the counters.
func (x *exchange) waitRequest(i uint8) {
	x.g.metrics.Attempts.Inc()
	x.qStart = time.Now()
	x.waitedBefore = x.waited
	x.qPermit, x.qErr = nil, nil
	// maxWaitMs bounds the request's whole wait: a candidate tried after
	// another one's wait (it turned unhealthy meanwhile, or an earlier
	// attempt failed over) waits only for what is left.
	req := x.request(x.targets[i])
	if x.waited > 0 {
		req.MaxWait = max(req.MaxWait-x.waited, time.Millisecond)
	}
	if x.aff.waiting {
		req.MaxWait = min(req.MaxWait, x.s.eff.AffinityMaxWait())
	}
	x.key.Carry.Queued[clientkey.PriorityIndex(req.Priority)].Add(1)
	x.qReq = req
}

// awaited handles the outcome of the wait on targets[i] (x.qPermit, x.qErr): done with the pick
// (x.cur) or the error to send, or not done to try the next candidate.
func (x *exchange) awaited(i uint8) (aerr *apiError, done bool) {
	g, t := x.g, x.targets[i]
	x.key.Carry.Queued[clientkey.PriorityIndex(x.qReq.Priority)].Add(-1)
	permit, err := x.qPermit, x.qErr
	x.qPermit, x.qErr = nil, nil
	if err != nil {
		var ae *admission.Error
		if !errors.As(err, &ae) {
			// The time queued is admission wait, not overhead, however the wait ended.
			x.waited += time.Since(x.qStart)
			if clusterUnavailable(err) {
				return errClusterUnavailable, true
			}
			if x.r.Context().Err() != nil {
				return errClientGone, true
			}
			// Neither the client leaving nor a typed rejection: a shared
			// store's error (a Redis OOM, NOPERM or script error) the
			// admitter did not turn into its fail mode. Never an empty 200:
			// answered as the store being away.
			g.logAdmitErr(err)
			return errClusterUnavailable, true
		}
		if ae.Code == admission.CodeShuttingDown {
			x.waited += ae.Waited
			return errShuttingDown, true
		}
		if x.aff.waiting && ae.Code == admission.CodeTimeout {
			// The bound connection stayed full for affinityMaxWaitMs:
			// the request spills to the usual order (followBinding).
			x.waited += ae.Waited
			return nil, false
		}
		if ae.Code == admission.CodeQueueFull {
			g.metrics.RejectQueueFull.Inc()
			if x.qFull == nil {
				x.qFull = ae
			}
			return nil, false
		}
		g.metrics.RejectTimeout.Inc()
		x.waited += ae.Waited
		return admissionError(ae), true
	}
	w := permit.Waited()
	x.waited += w
	g.metrics.WaitSeconds.Observe(w.Seconds())
	if !x.stillHealthy(t) {
		// It cooled down, was suspended or broke while we waited.
		x.release(permit)
		x.qRechoose = true
		return nil, false
	}
	if p, ok := x.admitted(t, int(i), permit); ok {
		x.cur, aerr = x.dispatchTurn(p, x.qStart)
		return aerr, true
	}
	return nil, false
}

// queueEnd is queue's answer when no candidate admitted the request.
func (x *exchange) queueEnd() *apiError {
	switch {
	case x.qRechoose:
		// Start over: the candidates' health has changed.
		return errRechoose
	case x.qFull != nil:
		return admissionError(x.qFull)
	}
	// Every candidate's breaker refused the attempt: a half-open breaker's
	// one probe was taken meanwhile. Its outcome may come any moment.
	return errNoHealthyNow(x.info.Model)
}

// orderByWait sorts the candidates by expected wait, shortest first; the
// sort is stable, so priority order breaks ties.
func (x *exchange) orderByWait() {
	cand := &x.cand
	if cand.n < 2 {
		return
	}
	var waits [maxCandidates]time.Duration
	for k, i := range cand.idx[:cand.n] {
		t := x.targets[i]
		d := x.g.ctrl.EstimateWait(x.request(t))
		if t.c.lim.Spacing > 0 {
			d = max(d, x.turnDelay(t.c))
		}
		waits[k] = d
	}
	sortByWait(cand.idx[:cand.n], waits[:cand.n])
}

// dispatchTurn waits for the admitted pick's connection dispatch turn
// within the request's one wait deadline: its admission wait started at
// start, after the request had waited x.waitedBefore on earlier
// candidates (the key's own turn was taken before any gate: keyTurnFirst).
// On failure the permit, the breaker's slot and the key's turn are given
// back.
func (x *exchange) dispatchTurn(p pick, start time.Time) (pick, *apiError) {
	c := p.t.c
	start = start.Add(-x.waitedBefore)
	if c.lim.Spacing == 0 {
		return p, nil
	}
	if aerr := x.takeTurn(c, start, x.request(p.t).MaxWait); aerr != nil {
		x.kturn.GiveBack()
		x.release(p.permit)
		p.done(health.ErrExcluded)
		return pick{}, aerr
	}
	return p, nil
}

// admitted asks the connection's breaker for the attempt; a half-open
// breaker lets one probe through, and a refused attempt gives its permit back.
// A connection test passes whatever the breaker says, and tells it nothing.
func (x *exchange) admitted(t *target, i int, pm permit) (pick, bool) {
	if x.probe {
		return pick{t: t, idx: i, permit: pm, done: probeDone}, true
	}
	done, ok := t.c.health.Allow()
	if !ok {
		x.release(pm)
		return pick{}, false
	}
	return pick{t: t, idx: i, permit: pm, done: done}, true
}

func admissionError(ae *admission.Error) *apiError {
	msg := "timed out waiting for a concurrency slot at gate " + ae.Gate.Key
	if ae.Code == admission.CodeQueueFull {
		msg = "the queue of gate " + ae.Gate.Key + " is full"
	}
	return &apiError{Status: http.StatusTooManyRequests, Code: ae.Code, Message: msg,
		RetryAfter: ae.RetryAfterSeconds(), Gate: ae.Gate.Key}
}
