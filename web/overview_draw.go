package web

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// sparkSize is the sparkline's viewBox.
const sparkW, sparkH = 120, 24

// sparkMax is the vertical scale of a gate's sparkline: its cap, or the largest value drawn.
func (g GateBar) sparkMax() int {
	m := max(g.Cap, 1)
	for _, s := range g.Samples {
		m = max(m, s.InFlight, s.Queued)
	}
	return m
}

// sparkPoints writes an SVG polyline's points for values scaled to top.
func sparkPoints(values []int, top int) string {
	if len(values) == 0 {
		return ""
	}
	if len(values) == 1 {
		values = []int{values[0], values[0]}
	}
	var b strings.Builder
	step := float64(sparkW) / float64(len(values)-1)
	for i, v := range values {
		if i > 0 {
			b.WriteByte(' ')
		}
		x := float64(i) * step
		y := float64(sparkH-1) - float64(v)*float64(sparkH-2)/float64(top)
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
	}
	return b.String()
}

func (g GateBar) inflightSeries() []int {
	out := make([]int, len(g.Samples))
	for i, s := range g.Samples {
		out[i] = s.InFlight
	}
	return out
}

// queuePoints draws the queue line only when something queued in the window.
func (g GateBar) queuePoints() string {
	q := g.queuedSeries()
	for _, v := range q {
		if v > 0 {
			return sparkPoints(q, g.sparkMax())
		}
	}
	return ""
}

func (g GateBar) queuedSeries() []int {
	out := make([]int, len(g.Samples))
	for i, s := range g.Samples {
		out[i] = s.Queued
	}
	return out
}

// joinInts writes "1,2,3" for the data attributes app.js extends.
func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// queuePipWidth is the queue drawing's width: one pip per waiter up to 30.
func queuePipWidth(queued int) string {
	return strconv.Itoa(min(queued, 30)*6) + "px"
}

// waitText writes an admission wait: whole milliseconds below 100 ms, where
// Duration's tenths of a second would round a real wait to nothing, else as
// Duration does ("0.4 s", "1.8 s", "12 s").
func waitText(l *Localizer, d time.Duration) string {
	if d < 100*time.Millisecond {
		return strconv.FormatInt(max(d, 0).Round(time.Millisecond).Milliseconds(), 10) + " ms"
	}
	return l.Duration(d)
}

// healthUntil is the remaining time of a cooldown or suspension, or 0.
func (c ConnectionBlock) healthUntil(now time.Time) time.Duration {
	if c.Until.IsZero() {
		return 0
	}
	return max(0, c.Until.Sub(now))
}

// kindBudget is one budget with its window's name, for drawing in order.
type kindBudget struct {
	Kind string // a live.Budget* name
	live.Budget
}

// budgetList is the connection's budgets ordered by window name.
func (c ConnectionBlock) budgetList() []kindBudget {
	out := make([]kindBudget, 0, len(c.Budgets))
	for k, b := range c.Budgets {
		out = append(out, kindBudget{Kind: k, Budget: b})
	}
	slices.SortFunc(out, func(a, b kindBudget) int { return cmp.Compare(a.Kind, b.Kind) })
	return out
}

// healthClass maps a health state onto the three meaning colours.
func healthClass(h string) string {
	switch h {
	case live.HealthOK:
		return "good"
	case live.HealthCooling, live.HealthHalfOpen:
		return "warn"
	case HealthDisabled:
		return "off"
	default:
		return "bad"
	}
}

// clusterTone is the colour class of a cluster mode: shared caps are good, a per-replica
// share a warning, refusing requests bad.
func clusterTone(mode string) string {
	switch mode {
	case live.ClusterRedisOK:
		return "good"
	case live.ClusterFailOpen:
		return "warn"
	default:
		return "bad"
	}
}

// clusterIcon goes with the mode's word, so colour is never alone.
func clusterIcon(mode string) string {
	switch mode {
	case live.ClusterRedisOK:
		return "✓"
	case live.ClusterFailOpen:
		return "◐"
	default:
		return "✕"
	}
}

// summaryKeys are the catalog keys of the summary's in-flight and queued labels:
// cluster-wide in cluster mode.
func (v Overview) summaryKeys() (inFlight, queued string) {
	if v.Cluster != nil {
		return "overview.inFlightCluster", "overview.queuedCluster"
	}
	return "overview.inFlight", "overview.queued"
}

// windowText names the time window a number covers: "over the last minute"
// when it is about one (55 s to 89 s), else "over the last 45 s" or "over the
// last 10 min" (whole seconds below 3 min, whole minutes from there).
func windowText(l *Localizer, d time.Duration) string {
	switch s := int(math.Round(d.Seconds())); {
	case s >= 55 && s < 90:
		return l.T("overview.windowMinute")
	case s < 180:
		return l.T("overview.window", strconv.Itoa(max(s, 1))+" s")
	default:
		return l.T("overview.window", strconv.Itoa(int(math.Round(d.Minutes())))+" min")
	}
}

// OverviewFragments are the overview's live parts that /live redraws on the
// server (as TrafficFragments for the request log's): the summary's p99 wait,
// each block's waiting keys and each connection gate's wait percentiles, by the
// name of the element (data-live-fragment) whose content each replaces.
func OverviewFragments(p Page, v Overview) map[string]templ.Component {
	m := map[string]templ.Component{
		"sum-p99":        summaryP99(p, v.Summary),
		"waiting-global": waitingKeysBlock(p, v.GlobalWaiting, v.GlobalWaitingByPriority, p.L.T("gate.global")),
		"key-caps":       keyCapsBlock(p, v.KeyCaps),
	}
	for _, c := range v.Connections {
		m["waiting-"+c.ID] = waitingKeysBlock(p, c.Waiting, c.WaitingByPriority, c.bottleneckName(p))
		for _, g := range c.Gates {
			if g.Level == live.LevelConnection {
				m["wait-"+g.Key] = gateWait(p, g)
			}
		}
	}
	return m
}
