package gateway

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/sony/gobreaker/v2"
)

// Cooldown backoff when an upstream 429 carries no usable Retry-After.
const (
	minBackoff = time.Second
	maxBackoff = 5 * time.Minute
)

// errBreakerExcluded marks an outcome the breaker must not count either way:
// the client went away, or the upstream answered 401/403/429 (alive, but
// handled by suspension or cooldown).
var errBreakerExcluded = errors.New("gateway: outcome not counted by the breaker")

// connHealth is a connection's upstream health. It outlives config
// snapshots: Apply carries it over by connection id.
type connHealth struct {
	mu             sync.Mutex
	suspendedUntil time.Time
	suspendReason  string
	cooling        map[string]*cooldown // by upstream model
	connCool       cooldown             // every model: upstream rate-limit headers said the account is spent
	breaker        *gobreaker.TwoStepCircuitBreaker[struct{}]
	breakerCfg     breakerConfig
	openUntil      atomic.Int64 // unix nanoseconds (real clock) the breaker opened until
	breakerReason  atomic.Pointer[string]
}

type cooldown struct {
	until  time.Time
	streak int // consecutive 429s without a success, for the backoff
	reason string
}

type breakerConfig struct {
	failures int
	cooldown time.Duration
}

func newConnHealth(cfg breakerConfig) *connHealth {
	h := &connHealth{cooling: make(map[string]*cooldown)}
	h.setBreaker(cfg)
	return h
}

// setBreaker (re)builds the breaker when its settings change; gobreaker's
// settings are fixed at construction, so a change starts it closed.
func (h *connHealth) setBreaker(cfg breakerConfig) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.breaker != nil && h.breakerCfg == cfg {
		return
	}
	h.breakerCfg = cfg
	h.openUntil.Store(0)
	if cfg.failures <= 0 {
		h.breaker = nil
		return
	}
	failures := uint32(cfg.failures)
	h.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		MaxRequests: 1,
		Timeout:     cfg.cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errBreakerExcluded) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				h.openUntil.Store(time.Now().Add(cfg.cooldown).UnixNano())
			}
		},
	})
}

// unavailable says why a target cannot be tried now, and until when.
type unavailable uint8

const (
	availableNow unavailable = iota
	unavailCooling
	unavailSuspended
	unavailBreaker
)

// check reports whether model on this connection may be tried at now.
// A half-open breaker counts as available while its probe is not taken
// (Allow decides who probes), and as unavailable while the probe runs.
func (h *connHealth) check(model string, now time.Time) (unavailable, time.Time) {
	h.mu.Lock()
	if now.Before(h.suspendedUntil) {
		until := h.suspendedUntil
		h.mu.Unlock()
		return unavailSuspended, until
	}
	br := h.breaker
	var cool time.Time
	if cd := h.cooling[model]; cd != nil && now.Before(cd.until) {
		cool = cd.until
	}
	if now.Before(h.connCool.until) && h.connCool.until.After(cool) {
		cool = h.connCool.until
	}
	h.mu.Unlock()
	if br != nil {
		switch br.State() {
		case gobreaker.StateOpen:
			return unavailBreaker, time.Unix(0, h.openUntil.Load())
		case gobreaker.StateHalfOpen:
			// The one probe is under way (excluded outcomes such as a 429
			// give its turn back): nobody else may try until it ends, which
			// may be any moment.
			if c := br.Counts(); c.Requests > c.TotalExclusions {
				return unavailBreaker, time.Now()
			}
		}
	}
	if !cool.IsZero() {
		return unavailCooling, cool
	}
	return availableNow, time.Time{}
}

// allow asks the breaker to let one attempt through. done must be called
// with the outcome: nil (success), errBreakerExcluded, or a failure.
func (h *connHealth) allow() (func(error), bool) {
	h.mu.Lock()
	br := h.breaker
	h.mu.Unlock()
	if br == nil {
		return func(error) {}, true
	}
	done, err := br.Allow()
	if err != nil {
		return nil, false
	}
	return done, true
}

// failure records the reason of the latest breaker failure, for Snapshot.
func (h *connHealth) failure(reason string) { h.breakerReason.Store(&reason) }

// coolDown puts model on this connection in cooldown after an upstream 429
// and returns when it ends.
func (h *connHealth) coolDown(model string, now time.Time, retryAfter time.Duration, reason string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	cd := h.cooling[model]
	if cd == nil {
		cd = &cooldown{}
		h.cooling[model] = cd
	}
	d := retryAfter
	if d <= 0 {
		d = min(minBackoff<<min(cd.streak, 20), maxBackoff)
	}
	cd.streak++
	cd.until = now.Add(d)
	cd.reason = reason
	return cd.until
}

// coolConnection puts every model on this connection in cooldown for d,
// never shortening one already there: the upstream's rate-limit headers said
// the account is spent until its reset. It returns when the cooldown ends.
func (h *connHealth) coolConnection(now time.Time, d time.Duration, reason string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if until := now.Add(d); until.After(h.connCool.until) {
		h.connCool.until = until
		h.connCool.reason = reason
	}
	return h.connCool.until
}

// succeeded ends the backoff streak of model after a successful answer.
func (h *connHealth) succeeded(model string) {
	h.mu.Lock()
	if cd := h.cooling[model]; cd != nil {
		delete(h.cooling, model)
	}
	h.mu.Unlock()
}

// suspend takes the whole connection out of rotation after a 401/403.
func (h *connHealth) suspend(now time.Time, d time.Duration, reason string) {
	if d <= 0 {
		return
	}
	h.mu.Lock()
	h.suspendedUntil = now.Add(d)
	h.suspendReason = reason
	h.mu.Unlock()
}

// reset clears suspension, cooldowns and the breaker.
func (h *connHealth) reset() {
	h.mu.Lock()
	h.suspendedUntil = time.Time{}
	h.suspendReason = ""
	clear(h.cooling)
	h.connCool = cooldown{}
	cfg := h.breakerCfg
	h.breaker = nil
	h.mu.Unlock()
	h.breakerReason.Store(nil)
	h.setBreaker(cfg)
}

// status summarises the health for Snapshot: the most severe state, when it
// ends, and why.
func (h *connHealth) status(now time.Time) (state string, until time.Time, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Before(h.suspendedUntil) {
		return live.HealthSuspended, h.suspendedUntil, h.suspendReason
	}
	if h.breaker != nil {
		switch h.breaker.State() {
		case gobreaker.StateOpen:
			return live.HealthBreakerOpen, time.Unix(0, h.openUntil.Load()), h.lastBreakerReason()
		case gobreaker.StateHalfOpen:
			return live.HealthHalfOpen, time.Time{}, h.lastBreakerReason()
		}
	}
	for _, cd := range h.cooling {
		if now.Before(cd.until) && cd.until.After(until) {
			until, reason = cd.until, cd.reason
		}
	}
	if cd := &h.connCool; now.Before(cd.until) && cd.until.After(until) {
		until, reason = cd.until, cd.reason
	}
	if !until.IsZero() {
		return live.HealthCooling, until, reason
	}
	return live.HealthOK, time.Time{}, ""
}

func (h *connHealth) lastBreakerReason() string {
	if p := h.breakerReason.Load(); p != nil {
		return *p
	}
	return ""
}

// maxRetryAfter caps the cooldown an upstream's Retry-After can set.
const maxRetryAfter = time.Hour

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date,
// either capped at maxRetryAfter. It returns 0 when the header is absent or
// unusable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}

// ceilSeconds rounds d up to whole seconds, at least 1, for Retry-After.
func ceilSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}
