package health

import "time"

// scope is what an upstream 403 cools: one route (the upstream path suffix,
// e.g. "/embeddings") and one upstream model of a connection. An account
// may lack one endpoint or one model (OpenAI's restricted keys answer 403
// there) and still serve the rest.
type scope struct{ route, model string }

// forbid403 is the latest 403 a connection answered, for the rule that
// suspends it after 403s on two different scopes.
type forbid403 struct {
	scope scope
	at    time.Time
}

// Forbidden records an upstream 403 for model on route at now (DESIGN.md,
// "Upstream 403 scoping"): that route and model cool for cool (the
// connection's breakerCooldownMs) while the rest of the connection is
// served as before. It reports whether the connection must be suspended
// now: a 403 on a different route or model came within window (suspendMs;
// 0: never). The caller suspends it (Suspend), here and for other replicas.
func (h *Conn) Forbidden(route, model string, now time.Time, cool, window time.Duration) (suspend bool) {
	s := scope{route, model}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cool > 0 {
		if h.forbidden == nil {
			h.forbidden = make(map[scope]time.Time)
		}
		for k, until := range h.forbidden {
			if !now.Before(until) {
				delete(h.forbidden, k) // keeps the map to the scopes cooling now
			}
		}
		h.forbidden[s] = now.Add(cool)
	}
	last := h.last403
	h.last403 = forbid403{scope: s, at: now}
	if window > 0 && !last.at.IsZero() && last.scope != s && now.Sub(last.at) < window {
		h.last403 = forbid403{}
		return true
	}
	return false
}

// forbiddenUntilLocked is when route and model stop cooling after a 403 (zero:
// they do not cool). h.mu is held.
func (h *Conn) forbiddenUntilLocked(route, model string, now time.Time) time.Time {
	if len(h.forbidden) == 0 {
		return time.Time{}
	}
	if until, ok := h.forbidden[scope{route, model}]; ok && now.Before(until) {
		return until
	}
	return time.Time{}
}
