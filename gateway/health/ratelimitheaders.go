package health

import (
	"net/http"
	"time"
)

// Upstream rate-limit headers (DESIGN.md, Gateway): a response saying that a
// dimension of the account's rate limit has nothing left cools the whole
// connection until that dimension resets (Conn.CoolConnection), so the next
// request goes elsewhere (or is told UPSTREAM_COOLDOWN) instead of earning
// a 429. The gateway reads them on every upstream answer: the common path
// (nothing exhausted, RateLimitExhausted false) is six map lookups.

// ReasonRateLimitHeaders is the health reason of such a cooldown.
const ReasonRateLimitHeaders = "upstream rate-limit headers"

// maxRateLimitReset caps the cooldown rate-limit headers can set: a daily
// token limit's reset must not take a connection out for hours on one
// answer.
const maxRateLimitReset = time.Minute

// rateLimitPair is a remaining header and the reset header of the same
// dimension, in canonical form so that the map is indexed without
// canonicalising.
type rateLimitPair struct {
	remaining, reset string
	rfc3339          bool // the reset is an instant (Anthropic), not a duration (OpenAI)
}

var rateLimitPairs = [...]rateLimitPair{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", false},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", false},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset", true},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset", true},
}

// RateLimitExhausted reports whether any remaining header of h is "0".
func RateLimitExhausted(h http.Header) bool {
	for i := range rateLimitPairs {
		if v := h[rateLimitPairs[i].remaining]; len(v) > 0 && v[0] == "0" {
			return true
		}
	}
	return false
}

// RateLimitCooldown is how long h says the connection must rest at now: the
// earliest future reset among the dimensions whose remaining is "0", at
// most maxRateLimitReset, or 0 when there is none (a reset that is missing,
// unparsable, zero, negative or past is ignored).
func RateLimitCooldown(h http.Header, now time.Time) time.Duration {
	var best time.Duration
	for i := range rateLimitPairs {
		p := &rateLimitPairs[i]
		if v := h[p.remaining]; len(v) == 0 || v[0] != "0" {
			continue
		}
		v := h[p.reset]
		if len(v) == 0 {
			continue
		}
		d := parseRateLimitReset(v[0], p.rfc3339, now)
		if d > 0 && (best == 0 || d < best) {
			best = d
		}
	}
	return min(best, maxRateLimitReset)
}

// parseRateLimitReset reads one reset header: an OpenAI duration ("20ms",
// "6m0s", "2m59.56s") or, with rfc3339, an Anthropic instant. It returns
// the time from now to the reset, or 0 when the value is unusable or the
// reset is not in the future.
func parseRateLimitReset(v string, rfc3339 bool, now time.Time) time.Duration {
	var d time.Duration
	if rfc3339 {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return 0
		}
		d = t.Sub(now)
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0
		}
	}
	return max(d, 0)
}
