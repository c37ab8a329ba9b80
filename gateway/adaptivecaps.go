package gateway

import (
	"maps"
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/health"
)

// setCaps pushes caps (a config snapshot's, by gate key) to admission with
// every adaptive gate's effective cap in place of its configured one, and
// keeps them for later pushes by the learner.
func (g *Gateway) setCaps(caps map[string]int) {
	g.capsMu.Lock()
	defer g.capsMu.Unlock()
	g.confCaps = caps
	g.pushCapsLocked()
}

// pushCaps pushes the caps again after the learner changed an effective cap.
func (g *Gateway) pushCaps() {
	g.capsMu.Lock()
	defer g.capsMu.Unlock()
	if g.confCaps != nil {
		g.pushCapsLocked()
	}
}

func (g *Gateway) pushCapsLocked() {
	eff := g.learn.Effective()
	if len(eff) == 0 {
		g.ctrl.SetCaps(g.confCaps)
		return
	}
	caps := maps.Clone(g.confCaps)
	for key, c := range eff {
		if _, ok := caps[key]; ok {
			caps[key] = c
		}
	}
	g.ctrl.SetCaps(caps)
}

// learnRejected cuts the adaptive gates of lp when an upstream answer (its
// body kept in x.last) is a rejection the learner counts: 429, 503, 529, or
// an error body naming concurrency or overload. It reports whether that
// cut stands instead of a cooldown: the body named concurrency or overload
// and no Retry-After came with it (too many at once is not "stop for a
// while"); with a Retry-After the connection cools as well.
func (x *exchange) learnRejected(lp health.LearnPath, status int, h http.Header) bool {
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

// configuredCaps returns the configured cap of every adaptive gate in
// stats (admission reports the effective cap in force), by key.
func (g *Gateway) configuredCaps(stats []admission.GateStats) map[string]int {
	eff := g.learn.Effective()
	if len(eff) == 0 {
		return nil
	}
	g.capsMu.Lock()
	defer g.capsMu.Unlock()
	out := make(map[string]int, len(eff))
	for _, st := range stats {
		if _, ok := eff[st.Key]; ok {
			if c, ok := g.confCaps[st.Key]; ok {
				out[st.Key] = c
			}
		}
	}
	return out
}
