package gateway

import (
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// pick is an admitted attempt: the target, its permit, and the breaker's
// outcome callback.
type pick struct {
	t      *target
	idx    int
	permit *admission.Permit
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
// breaker open, or cooling; Retry-After the earliest recovery), an admission
// error, or nil when the healthy candidates have all been tried.
func (x *exchange) choose() (pick, *apiError) {
	g := x.g
	now := g.now()
	n := len(x.targets)
	var orderBuf, healthyBuf [maxCandidates]int
	order := orderBuf[:0]
	rot := g.rotate.Add(1)
	for i := 0; i < n; {
		j := i
		for j < n && x.targets[j].c.priority == x.targets[i].c.priority {
			j++
		}
		size := j - i
		off := int(rot % uint64(size))
		for k := range size {
			order = append(order, i+(off+k)%size)
		}
		i = j
	}

	healthy := healthyBuf[:0]
	var coolFor, recoverIn time.Duration
	var coolGate string
	nCooling, nOK := 0, 0
	for _, i := range order {
		t := x.targets[i]
		why, until := t.c.health.check(t.model, now)
		var left time.Duration
		switch why {
		case availableNow:
			nOK++
			if x.tried&(1<<i) == 0 {
				healthy = append(healthy, i)
			}
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
		case nCooling == n:
			return pick{}, &apiError{status: http.StatusTooManyRequests, code: CodeUpstreamCooldown,
				message:    "every connection serving " + x.info.model + " is cooling down after upstream rate limits",
				retryAfter: ceilSeconds(coolFor), gate: coolGate}
		case nOK == 0:
			return pick{}, &apiError{status: http.StatusServiceUnavailable, code: CodeNoHealthy,
				message:    "no healthy connection serves " + x.info.model + " right now",
				retryAfter: ceilSeconds(recoverIn)}
		}
		return pick{}, nil
	}

	for _, i := range healthy {
		t := x.targets[i]
		permit, ok := g.ctrl.TryAcquire(t.req)
		if !ok {
			continue
		}
		g.metrics.attempts.Inc()
		g.metrics.waitSeconds.Observe(0)
		if p, ok := admitted(t, i, permit); ok {
			return p, nil
		}
	}

	// Nobody can admit now: queue where the wait looks shortest.
	type est struct {
		i int
		d time.Duration
	}
	var estBuf [maxCandidates]est
	ests := estBuf[:0]
	for _, i := range healthy {
		ests = append(ests, est{i, g.ctrl.EstimateWait(x.targets[i].req)})
	}
	slices.SortStableFunc(ests, func(a, b est) int {
		switch {
		case a.d < b.d:
			return -1
		case a.d > b.d:
			return 1
		}
		return 0
	})
	var full *admission.Error
	for _, e := range ests {
		t := x.targets[e.i]
		g.metrics.attempts.Inc()
		permit, err := g.ctrl.Acquire(x.r.Context(), t.req)
		if err != nil {
			var ae *admission.Error
			if !errors.As(err, &ae) {
				return pick{}, errClientGone
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
		if p, ok := admitted(t, e.i, permit); ok {
			return p, nil
		}
	}
	if full != nil {
		return pick{}, admissionError(full)
	}
	return pick{}, nil
}

// admitted asks the connection's breaker for the attempt; a half-open
// breaker lets one probe through, and a refused attempt gives its permit back.
func admitted(t *target, i int, permit *admission.Permit) (pick, bool) {
	done, ok := t.c.health.allow()
	if !ok {
		permit.Release()
		return pick{}, false
	}
	return pick{t: t, idx: i, permit: permit, done: done}, true
}

func admissionError(ae *admission.Error) *apiError {
	msg := "timed out waiting for a concurrency slot at gate " + ae.Gate.Key
	if ae.Code == admission.CodeQueueFull {
		msg = "the queue of gate " + ae.Gate.Key + " is full"
	}
	return &apiError{status: http.StatusTooManyRequests, code: ae.Code, message: msg,
		retryAfter: ae.RetryAfterSeconds(), gate: ae.Gate.Key}
}
