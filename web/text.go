package web

import (
	"encoding/json"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// Icons accompany every colour, so meaning never rests on colour alone.
func stateIcon(state string) string {
	switch state {
	case StateRejecting:
		return "✕"
	case StateQueueing:
		return "◐"
	case StateFull:
		return "●"
	case StateBusy:
		return "◑"
	default:
		return "○"
	}
}

func healthIcon(h string) string {
	switch h {
	case live.HealthOK:
		return "✓"
	case live.HealthCooling, live.HealthHalfOpen:
		return "◐"
	case HealthDisabled:
		return "–"
	default:
		return "✕"
	}
}

func flashIcon(kind string) string {
	switch kind {
	case FlashSuccess:
		return "✓"
	case FlashError:
		return "✕"
	default:
		return "i"
	}
}

// healthText is the connection's health in words: "ok", "cooling 12 s", "suspended 29 min".
func healthText(p Page, c ConnectionBlock) string {
	word := p.L.T("health." + c.Health)
	if d := c.healthUntil(p.now()); d > 0 {
		return p.L.T("health.for", word, p.L.Duration(d))
	}
	return word
}

// gateName is a gate's label in its block.
func gateName(p Page, g GateBar) string {
	if g.Shadow {
		if g.Level == live.LevelModel {
			return p.L.T("gate.shadowModel", g.Label)
		}
		return p.L.T("gate.shadowConnection")
	}
	switch g.Level {
	case live.LevelGlobal:
		return p.L.T("gate.global")
	case live.LevelProvider:
		return p.L.T("gate.provider", g.Label)
	case live.LevelConnection:
		return p.L.T("gate.connection")
	default:
		return g.Label
	}
}

// barWidth is the width of a gate's fill: in flight over the cap in force. It is an
// SVG width attribute, not a style attribute, which the CSP (style-src 'self') refuses.
func barWidth(g GateBar) string { return percent(g.InFlight, g.capInForce()) }

// liveLabels is the JSON app.js uses to write states and health in the page's language.
func liveLabels(p Page) string {
	m := map[string]string{
		"for":              p.L.T("health.for", "%1", "%2"),
		"rejected.one":     p.L.T("overview.rejectedN.one"),
		"rejected.other":   p.L.T("overview.rejectedN.other"),
		"locale":           p.L.Tag(),
		"stale":            p.L.T("overview.liveStale"),
		"signedOut":        p.L.T("overview.sessionEnded"),
		"signIn":           p.L.T("overview.signInAgain"),
		"learned":          p.L.T("overview.learnedRatio", "%1", "%2", "%3"),
		"wouldQueue.one":   p.L.T("overview.wouldQueueN.one"),
		"wouldQueue.other": p.L.T("overview.wouldQueueN.other"),
		"peak":             p.L.T("overview.peak", "%1"),
	}
	for _, s := range []string{StateIdle, StateBusy, StateFull, StateQueueing, StateRejecting} {
		m["state."+s] = p.L.T("state." + s)
	}
	for _, h := range []string{live.HealthOK, live.HealthCooling, live.HealthSuspended, live.HealthBreakerOpen, live.HealthHalfOpen, HealthDisabled} {
		m["health."+h] = p.L.T("health." + h)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// statusText is the localised name of an HTTP status.
func statusText(p Page, status int) string {
	key := "status." + strconv.Itoa(status)
	if p.L.HasKey(key) {
		return p.L.T(key)
	}
	return p.L.T("status.other")
}

// fieldLabel is the localised label of a form field.
func fieldLabel(p Page, name string) string { return p.L.T("field." + name) }

func countErrors(e FieldErrors) int {
	n := 0
	for _, m := range e {
		n += len(m)
	}
	return n
}
