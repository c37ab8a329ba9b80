package health

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

// ErrExcluded marks an outcome the breaker must not count either way:
// the client went away, or the upstream answered 401/403/429 (alive, but
// handled by suspension or cooldown).
var ErrExcluded = errors.New("health: outcome not counted by the breaker")

// Conn is a connection's upstream health: cooldowns per model and for the
// whole connection, suspension and circuit breaker. It outlives config
// snapshots: the gateway carries it over by connection id. Its methods are
// safe for concurrent use.
type Conn struct {
	mu             sync.Mutex
	suspendedUntil time.Time
	suspendReason  string
	cooling        map[string]*cooldown // by upstream model
	connCool       cooldown             // every model: upstream rate-limit headers said the account is spent
	forbidden      map[scope]time.Time  // route and model cooling after an upstream 403, until
	last403        forbid403            // the latest 403, for the suspension after two scopes
	breaker        *gobreaker.TwoStepCircuitBreaker[struct{}]
	breakerCfg     BreakerConfig
	openUntil      atomic.Int64 // unix nanoseconds (real clock) the breaker opened until
	breakerReason  atomic.Pointer[string]
	windows        Windows // the usage windows of the latest answer that reported any
}

// cooldown is one cooldown of a model or of the whole connection.
type cooldown struct {
	until  time.Time
	streak int // consecutive 429s without a success, for the backoff
	reason string
}

// BreakerConfig sets a connection's circuit breaker: it opens after
// Failures consecutive failures (0: no breaker) and lets one probe through
// after Cooldown.
type BreakerConfig struct {
	Failures int
	Cooldown time.Duration
}

// NewConn returns the health of a connection whose breaker follows cfg.
func NewConn(cfg BreakerConfig) *Conn {
	h := &Conn{cooling: make(map[string]*cooldown)}
	h.SetBreaker(cfg)
	return h
}

// SetBreaker (re)builds the breaker when its settings change; gobreaker's
// settings are fixed at construction, so a change starts it closed.
func (h *Conn) SetBreaker(cfg BreakerConfig) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.breaker != nil && h.breakerCfg == cfg {
		return
	}
	h.breakerCfg = cfg
	h.openUntil.Store(0)
	if cfg.Failures <= 0 {
		h.breaker = nil
		return
	}
	failures := uint32(cfg.Failures)
	h.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		MaxRequests: 1,
		Timeout:     cfg.Cooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, ErrExcluded) },
		OnStateChange: func(_ string, _, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				h.openUntil.Store(time.Now().Add(cfg.Cooldown).UnixNano())
			}
		},
	})
}

// Verdict says why a target cannot be tried now, and until when.
type Verdict uint8

const (
	Available Verdict = iota
	Cooling
	Suspended
	Breaker
	// Forbidden: the route and model answered 403 and cool for a while
	// (Conn.Forbidden). Not a rate limit: the gateway counts it as
	// unhealthy, like a suspension.
	Forbidden
)

// Check reports whether model on route (the upstream path suffix) of this
// connection may be tried at now.
// A half-open breaker counts as available while its probe is not taken
// (Allow decides who probes), and as Verdict while the probe runs.
func (h *Conn) Check(route, model string, now time.Time) (Verdict, time.Time) {
	h.mu.Lock()
	if now.Before(h.suspendedUntil) {
		until := h.suspendedUntil
		h.mu.Unlock()
		return Suspended, until
	}
	br := h.breaker
	var cool time.Time
	if cd := h.cooling[model]; cd != nil && now.Before(cd.until) {
		cool = cd.until
	}
	if now.Before(h.connCool.until) && h.connCool.until.After(cool) {
		cool = h.connCool.until
	}
	forbid := h.forbiddenUntilLocked(route, model, now)
	h.mu.Unlock()
	if br != nil {
		switch br.State() {
		case gobreaker.StateOpen:
			return Breaker, time.Unix(0, h.openUntil.Load())
		case gobreaker.StateHalfOpen:
			// The one probe is under way (excluded outcomes such as a 429
			// give its turn back): nobody else may try until it ends, which
			// may be any moment.
			if c := br.Counts(); c.Requests > c.TotalExclusions {
				return Breaker, time.Now()
			}
		}
	}
	if !forbid.IsZero() {
		return Forbidden, forbid
	}
	if !cool.IsZero() {
		return Cooling, cool
	}
	return Available, time.Time{}
}

// Allow asks the breaker to let one attempt through. done must be called
// with the outcome: nil (success), ErrExcluded, or a failure.
func (h *Conn) Allow() (func(error), bool) {
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

// Failure records the reason of the latest breaker failure, for Snapshot.
func (h *Conn) Failure(reason string) { h.breakerReason.Store(&reason) }

// CoolDown puts model on this connection in cooldown after an upstream 429
// and returns when it ends.
func (h *Conn) CoolDown(model string, now time.Time, retryAfter time.Duration, reason string) time.Time {
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

// CoolConnection puts every model on this connection in cooldown for d,
// never shortening one already there: the upstream's rate-limit headers said
// the account is spent until its reset. It returns when the cooldown ends.
func (h *Conn) CoolConnection(now time.Time, d time.Duration, reason string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	if until := now.Add(d); until.After(h.connCool.until) {
		h.connCool.until = until
		h.connCool.reason = reason
	}
	return h.connCool.until
}

// Succeeded ends the backoff streak of model after a successful answer. A
// cooldown still running keeps its deadline: the answer may come from a
// request dispatched before the 429 that set it, and ending the cooldown
// at once would send traffic back into the upstream's Retry-After.
func (h *Conn) Succeeded(model string) {
	h.mu.Lock()
	if cd := h.cooling[model]; cd != nil {
		cd.streak = 0
	}
	h.mu.Unlock()
}

// Suspend takes the whole connection out of rotation after a 401, or after
// 403s on two routes or models (Forbidden).
func (h *Conn) Suspend(now time.Time, d time.Duration, reason string) {
	if d <= 0 {
		return
	}
	h.mu.Lock()
	h.suspendedUntil = now.Add(d)
	h.suspendReason = reason
	h.mu.Unlock()
}

// Reset clears suspension, cooldowns and the breaker.
func (h *Conn) Reset() {
	h.mu.Lock()
	h.suspendedUntil = time.Time{}
	h.suspendReason = ""
	clear(h.cooling)
	h.connCool = cooldown{}
	clear(h.forbidden)
	h.last403 = forbid403{}
	cfg := h.breakerCfg
	h.breaker = nil
	h.mu.Unlock()
	h.breakerReason.Store(nil)
	h.SetBreaker(cfg)
}

// Status summarises the health for Snapshot: the most severe state, when it
// ends, and why.
func (h *Conn) Status(now time.Time) (state string, until time.Time, reason string) {
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
	for s, u := range h.forbidden {
		if now.Before(u) && u.After(until) {
			until, reason = u, "upstream 403 for "+s.model+" on "+s.route
		}
	}
	if !until.IsZero() {
		return live.HealthCooling, until, reason
	}
	return live.HealthOK, time.Time{}, ""
}

func (h *Conn) lastBreakerReason() string {
	if p := h.breakerReason.Load(); p != nil {
		return *p
	}
	return ""
}

// maxRetryAfter caps the cooldown an upstream's Retry-After can set.
const maxRetryAfter = time.Hour

// ParseRetryAfter reads a Retry-After header: delay seconds or an HTTP date,
// either capped at maxRetryAfter. It returns 0 when the header is absent or
// unusable.
func ParseRetryAfter(v string, now time.Time) time.Duration {
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
