package gateway

import (
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/health"
)

// learnRejected cuts the adaptive gates of lp when an upstream answer (its
// body kept in x.last) is a rejection the learner counts: 429, 503, 529, or
// an error body naming concurrency or overload. It reports whether that
// cut stands instead of a cooldown: the body named concurrency or overload
// and no Retry-After came with it (too many at once is not "stop for a
// while"); with a Retry-After the connection cools as well.
func (x *exchange) learnRejected(lp health.LearnPath, status int, h http.Header) bool {
	if x.probe {
		return false
	}
	if len(lp) == 0 {
		return false
	}
	named := x.last != nil && health.NamesOverload(x.last.body)
	if !named && status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable && status != health.StatusOverloaded {
		return false
	}
	lp.Rejected(x.r.Context(), "upstream "+strconv.Itoa(status))
	return named && len(h["Retry-After"]) == 0
}
