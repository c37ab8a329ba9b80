package gateway

import (
	"errors"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
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
var errClientGone = &apiError{status: 499, code: "CLIENT_GONE", message: "client went away"}

// choose finds the connection for the next attempt and admits the request
// there. Candidates are the targets not yet tried whose connection is
// healthy for the model. The first of them, highest priority first (equal
// priorities rotated so they share the load), that admits at once wins;
// when none can, the request queues on the one with the shortest expected
// wait, higher priority first among equals. A full queue moves on to the
// next; a timeout ends the request with 429.
//
// It returns a zero pick and an error to send when nothing can be tried:
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
// goroutine stack of a queued request stays within 4 KiB.
//
// A request that queued re-checks its connection's health once admitted:
// when the connection answered 429 or 401/403 (or its breaker opened) while
// the request waited, the permit goes back and the choice starts over, so
// queued requests never reach an upstream that is cooling down or suspended.
func (x *exchange) choose() (pick, *apiError) {
	for range maxRechoose {
		cand, aerr := x.healthy()
		if cand.n == 0 {
			return pick{}, aerr
		}
		if p, aerr, ok := x.admitNow(&cand); ok {
			return p, aerr
		}
		if p, aerr := x.queue(&cand); aerr != errRechoose {
			return p, aerr
		}
	}
	return pick{}, errNoHealthyNow(x.info.model)
}

// maxRechoose bounds how often one choice starts over after its admitted
// connection turned out unhealthy.
const maxRechoose = 4

// errRechoose is queue's answer when a connection admitted the request but
// became unhealthy while it waited: choose starts over.
var errRechoose = &apiError{status: http.StatusServiceUnavailable, code: CodeNoHealthy}

// errNoHealthyNow is the 503 for a request whose candidates all turned
// unhealthy or busy probing while it was being placed; their state may
// change any moment, hence Retry-After 1.
func errNoHealthyNow(model string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, code: CodeNoHealthy,
		message: "no healthy connection serves " + model + " right now", retryAfter: 1}
}

// stillHealthy reports whether t may still be tried now (healthy and within
// its budgets): a request that waited for its permit checks again before
// dispatch.
func (x *exchange) stillHealthy(t *target) bool {
	now := x.g.now()
	why, _ := x.g.limiter.check(x.r.Context(), t.c, t.model, now)
	if why != availableNow {
		return false
	}
	if t.c.lim.budgeted() {
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

// healthy returns the untried candidates that are healthy for the model and
// within their budgets, highest priority first (equal priorities rotated),
// or, when there are none, the error to send (nil: all have been tried).
func (x *exchange) healthy() (candidates, *apiError) {
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
	var rateBlk rateBlock
	nCooling, nOK, nRate := 0, 0, 0
	for _, i := range order {
		t := x.targets[i]
		why, until := g.limiter.check(x.r.Context(), t.c, t.model, now)
		var left time.Duration
		switch why {
		case availableNow:
			if x.tried&(1<<i) != 0 {
				nOK++
				continue
			}
			if t.c.lim.budgeted() {
				if b, blocked := x.budgetBlocked(t.c, now); blocked {
					// Out of budget: skipped like a cooling connection.
					nRate++
					left = b.until.Sub(now)
					if rateBlk.code == "" || left < rateFor {
						rateFor, rateBlk = left, b
					}
					break
				}
			}
			nOK++
			healthy = append(healthy, i)
			continue
		case unavailCooling:
			nCooling++
			left = until.Sub(now)
			if coolGate == "" || left < coolFor {
				coolFor, coolGate = left, "cooldown:"+t.c.id+":"+t.model
			}
		case unavailSuspended:
			left = until.Sub(now)
		case unavailBreaker:
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
			return candidates{}, x.rateError(rateBlk, retry)
		case nCooling == n:
			return candidates{}, &apiError{status: http.StatusTooManyRequests, code: CodeUpstreamCooldown,
				message:    "every connection serving " + x.info.model + " is cooling down after upstream rate limits",
				retryAfter: ceilSeconds(coolFor), gate: coolGate}
		case nOK == 0:
			return candidates{}, &apiError{status: http.StatusServiceUnavailable, code: CodeNoHealthy,
				message:    "no healthy connection serves " + x.info.model + " right now",
				retryAfter: ceilSeconds(recoverIn)}
		}
		return candidates{}, nil
	}

	var cand candidates
	cand.n = copy(cand.idx[:], healthy)
	return cand, nil
}

// budgetBlocked reports whether an exhausted budget keeps c out at now:
// with shared limits the tpm window is the cluster's.
func (x *exchange) budgetBlocked(c *conn, now time.Time) (rateBlock, bool) {
	return x.g.limiter.blocked(x.r.Context(), c, now)
}

// turnDelay is how long a dispatch turn on c reserved now would wait: with
// shared limits, as far as this replica knows.
func (x *exchange) turnDelay(c *conn) time.Duration {
	return x.g.limiter.turnDelay(c, time.Now())
}

// admitNow takes the first candidate that can admit and dispatch at once;
// ok is false when none can.
func (x *exchange) admitNow(cand *candidates) (p pick, aerr *apiError, ok bool) {
	g := x.g
	for _, i := range cand.idx[:cand.n] {
		t := x.targets[i]
		if t.c.lim.spacing > 0 && x.turnDelay(t.c) > 0 {
			continue
		}
		start := time.Now()
		permit, ok := x.tryAdmit(x.request(t))
		if !ok {
			continue
		}
		g.metrics.attempts.Inc()
		g.metrics.waitSeconds.Observe(0)
		if p, ok := admitted(t, int(i), permit); ok {
			p, aerr := x.dispatchTurn(p, start)
			return p, aerr, true
		}
	}
	return pick{}, nil, false
}

// queue waits for a permit on the candidate where the wait looks shortest,
// moving on to the next when a queue is full.
func (x *exchange) queue(cand *candidates) (pick, *apiError) {
	g := x.g
	x.orderByWait(cand)
	var full *admission.Error
	rechoose := false
	for _, i := range cand.idx[:cand.n] {
		t := x.targets[i]
		g.metrics.attempts.Inc()
		start := time.Now()
		// maxWaitMs bounds the request's whole wait: a candidate tried after
		// another one's wait (it turned unhealthy meanwhile, or an earlier
		// attempt failed over) waits only for what is left.
		req := x.request(t)
		if x.waited > 0 {
			req.MaxWait = max(req.MaxWait-x.waited, time.Millisecond)
		}
		x.key.carry.queued.Add(1)
		permit, err := x.admit(x.r.Context(), req)
		x.key.carry.queued.Add(-1)
		if err != nil {
			var ae *admission.Error
			if !errors.As(err, &ae) {
				// The time queued is admission wait, not overhead, however the wait ended.
				x.waited += time.Since(start)
				if clusterUnavailable(err) {
					return pick{}, errClusterUnavailable
				}
				return pick{}, errClientGone
			}
			if ae.Code == admission.CodeShuttingDown {
				x.waited += ae.Waited
				return pick{}, errShuttingDown
			}
			if ae.Code == admission.CodeQueueFull {
				g.metrics.rejectQueueFull.Inc()
				if full == nil {
					full = ae
				}
				continue
			}
			g.metrics.rejectTimeout.Inc()
			x.waited += ae.Waited
			return pick{}, admissionError(ae)
		}
		w := permit.Waited()
		x.waited += w
		g.metrics.waitSeconds.Observe(w.Seconds())
		if !x.stillHealthy(t) {
			// It cooled down, was suspended or broke while we waited.
			permit.Release()
			rechoose = true
			continue
		}
		if p, ok := admitted(t, int(i), permit); ok {
			return x.dispatchTurn(p, start)
		}
	}
	switch {
	case rechoose:
		// Start over: the candidates' health has changed.
		return pick{}, errRechoose
	case full != nil:
		return pick{}, admissionError(full)
	}
	// Every candidate's breaker refused the attempt: a half-open breaker's
	// one probe was taken meanwhile. Its outcome may come any moment.
	return pick{}, errNoHealthyNow(x.info.model)
}

// orderByWait sorts the candidates by expected wait, shortest first; the
// sort is stable, so priority order breaks ties.
func (x *exchange) orderByWait(cand *candidates) {
	if cand.n < 2 {
		return
	}
	var waits [maxCandidates]time.Duration
	for k, i := range cand.idx[:cand.n] {
		t := x.targets[i]
		d := x.g.ctrl.EstimateWait(x.request(t))
		if t.c.lim.spacing > 0 {
			d = max(d, x.turnDelay(t.c))
		}
		waits[k] = d
	}
	sortByWait(cand.idx[:cand.n], waits[:cand.n])
}

// dispatchTurn waits for the admitted pick's dispatch turn within the
// deadline its admission wait started at start; on failure the permit and
// the breaker's slot are given back.
func (x *exchange) dispatchTurn(p pick, start time.Time) (pick, *apiError) {
	c := p.t.c
	if x.key.lim.spacing > 0 {
		if aerr := x.keyTurn(start, x.request(p.t).MaxWait); aerr != nil {
			p.permit.Release()
			p.done(errBreakerExcluded)
			return pick{}, aerr
		}
	}
	if c.lim.spacing == 0 {
		return p, nil
	}
	if aerr := x.g.limiter.takeTurn(x, c, start, x.request(p.t).MaxWait); aerr != nil {
		p.permit.Release()
		p.done(errBreakerExcluded)
		return pick{}, aerr
	}
	return p, nil
}

// admitted asks the connection's breaker for the attempt; a half-open
// breaker lets one probe through, and a refused attempt gives its permit back.
func admitted(t *target, i int, pm permit) (pick, bool) {
	done, ok := t.c.health.allow()
	if !ok {
		pm.Release()
		return pick{}, false
	}
	return pick{t: t, idx: i, permit: pm, done: done}, true
}

func admissionError(ae *admission.Error) *apiError {
	msg := "timed out waiting for a concurrency slot at gate " + ae.Gate.Key
	if ae.Code == admission.CodeQueueFull {
		msg = "the queue of gate " + ae.Gate.Key + " is full"
	}
	return &apiError{status: http.StatusTooManyRequests, code: ae.Code, message: msg,
		retryAfter: ae.RetryAfterSeconds(), gate: ae.Gate.Key}
}
