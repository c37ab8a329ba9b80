package web

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// GateSnapshot is every gate's numbers at one moment; a short history of them (say one
// every 5 s for 10 min) draws the sparklines and the "last minute" counts.
type GateSnapshot struct {
	At    time.Time
	Gates []live.Gate
}

// HealthDisabled is shown for a connection that is switched off, in place of the
// health the gateway reports (the live.Health* states).
const HealthDisabled = "disabled"

// ConnectionStatus is what the overview needs to know about one connection besides its
// gates: its health and budgets as the gateway reports them (ID, Name and Provider
// from the stored connection, which the gateway may not have caught up with yet), and
// whether it is switched on.
type ConnectionStatus struct {
	live.Connection
	Enabled bool
}

// OverviewInput is everything BuildOverview turns into an Overview.
type OverviewInput struct {
	Now         time.Time
	Gates       []live.Gate        // the current snapshot
	History     []GateSnapshot     // earlier snapshots, oldest first; may be empty
	Connections []ConnectionStatus // in display order
	// LiveURL is the JSON endpoint app.js polls ("/live"); "" turns live refresh off.
	LiveURL string
	// LiveIntervalMs is the poll interval; 0 means 2000.
	LiveIntervalMs int
	// Cluster is set in cluster mode only; then in-flight and queued counts are cluster-wide.
	Cluster *live.Cluster
	// Clients are the client keys' loads (live.Snapshot.Clients): the names and
	// weights of the keys waiting at a bottleneck.
	Clients []live.Client
}

// Overview is the overview page's view model. Build it with BuildOverview, or fill it
// by hand in tests.
type Overview struct {
	Summary Summary
	// Global holds the Gatehouse-wide gate when it is capped, drawn above the connections.
	Global []GateBar
	// GlobalBottleneck is the global gate's key when requests wait on it.
	GlobalBottleneck string
	// GlobalWaiting are the client keys waiting at the global gate.
	GlobalWaiting  []WaitingKey
	Connections    []ConnectionBlock
	LiveURL        string
	LiveIntervalMs int
	// Cluster is set in cluster mode only; the summary's counts are then cluster-wide.
	Cluster *live.Cluster
}

// Summary is the "Right now" line.
type Summary struct {
	InFlight           int // requests holding a connection gate
	Queued             int // requests waiting on any gate
	RejectedLastMinute int64
	// P99Wait is the 99th percentile admission wait over the last minute, across
	// the connection gates (each admission passes exactly one); HasP99Wait is
	// false when nothing was admitted in that minute, or there is no history yet.
	P99Wait    time.Duration
	HasP99Wait bool
}

// ConnectionBlock is one connection and the gates on its path below the global one,
// outermost first: its provider gate (when capped), its connection gate, its model gates.
type ConnectionBlock struct {
	ConnectionStatus
	Gates []GateBar
	// Shadows are the connection's shadow gates (connection first, then models by
	// id): counted, never enforced, so they are in no bottleneck and no summary.
	Shadows []GateBar
	// Bottleneck is the key of the gate blocking the most waiters, "" when none waits.
	Bottleneck string
	// Waiting are the client keys waiting at the bottleneck, largest share first
	// (empty when the gateway does not split its queue by key).
	Waiting []WaitingKey
}

// WaitingKey is one client key waiting at a bottleneck gate and its share of the
// gate's slots while the waiting keys stay backlogged: its weight over the total
// weight of the keys waiting there.
type WaitingKey struct {
	// ID is the key's id; "" for requests of no key (counted together).
	ID     string
	Name   string // the key's name; "" when the gateway does not know the key
	Weight int
	Queued int
	// Share is Weight ÷ the total weight of the keys waiting at the gate (0–1).
	Share float64
}

// waitingKeys lists the keys waiting at g from its QueuedByClient, named and
// weighed from clients (a key the live view does not list weighs
// limits.DefaultWeight), largest share first, then by name and id, requests
// of no key after the keys of their share.
func waitingKeys(g live.Gate, clients map[string]live.Client) []WaitingKey {
	var (
		out   []WaitingKey
		total int
	)
	for id, n := range g.QueuedByClient {
		if n <= 0 {
			continue
		}
		w := WaitingKey{ID: id, Queued: n, Weight: limits.DefaultWeight}
		if c, ok := clients[id]; ok {
			w.Name = c.Name
			if c.Weight > 0 {
				w.Weight = c.Weight
			}
		}
		total += w.Weight
		out = append(out, w)
	}
	for i := range out {
		out[i].Share = float64(out[i].Weight) / float64(total)
	}
	slices.SortFunc(out, func(a, b WaitingKey) int {
		return cmp.Or(cmp.Compare(b.Weight, a.Weight), cmp.Compare(noKey(a), noKey(b)), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// noKey is 1 for the requests of no key, which are listed after the keys.
func noKey(w WaitingKey) int {
	if w.ID == "" {
		return 1
	}
	return 0
}

// bottleneckName is the name of the block's bottleneck gate, as its row shows it.
func (c ConnectionBlock) bottleneckName(p Page) string {
	for _, g := range c.Gates {
		if g.Key == c.Bottleneck {
			return gateName(p, g)
		}
	}
	return ""
}

// waitingAt lists the keys waiting at the gate keyed bottleneck among gates.
func waitingAt(gates []GateBar, bottleneck string, clients map[string]live.Client) []WaitingKey {
	if bottleneck == "" {
		return nil
	}
	for _, g := range gates {
		if g.Key == bottleneck {
			return waitingKeys(g.Gate, clients)
		}
	}
	return nil
}

// shareText writes a share as a whole percentage ("75%"); a share that rounds
// to 0 but is not 0 is "<1%".
func shareText(s float64) string {
	p := math.Round(s * 100)
	if p == 0 && s > 0 {
		return "<1%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// GateBar is one gate drawn as a bar.
type GateBar struct {
	live.Gate
	// Label names the gate in its block: the model id for a model gate, the provider
	// for a provider gate; "" for the connection and global gates (localised by level).
	Label string
	// RejectedLastMinute counts timeouts and full-queue rejections in the last minute.
	RejectedLastMinute int64
	// WaitP50 and WaitP99 are the median and 99th percentile admission waits
	// over the history window; HasWait is false when nobody was admitted in it.
	WaitP50, WaitP99 time.Duration
	HasWait          bool
	// Samples are in-flight and queued over the history window, oldest first, for the sparkline.
	Samples []Sample
}

// Sample is one point of a sparkline.
type Sample struct {
	InFlight int
	Queued   int
}

// Gate states, shown as a colour and always also as a word.
const (
	StateIdle      = "idle"      // room to spare
	StateFull      = "full"      // at cap, nobody waiting
	StateQueueing  = "queueing"  // requests are waiting
	StateRejecting = "rejecting" // rejections in the last minute
)

// State classifies the gate for colour and word.
func (g GateBar) State() string {
	switch {
	case g.RejectedLastMinute > 0:
		return StateRejecting
	case g.Queued > 0:
		return StateQueueing
	case g.capInForce() > 0 && g.InFlight >= g.capInForce():
		return StateFull
	default:
		return StateIdle
	}
}

// capInForce is the cap admission enforces: the learned one on an adaptive gate.
func (g GateBar) capInForce() int {
	if g.Adaptive && g.EffectiveCap > 0 {
		return g.EffectiveCap
	}
	return g.Cap
}

// ratioText writes in-flight against the cap, as "2 / 3 of 8, learned" on an
// adaptive gate (in flight / effective cap of the configured cap).
func (g GateBar) ratioText(p Page) string {
	if g.Adaptive && g.EffectiveCap > 0 {
		return p.L.T("overview.learnedRatio", strconv.Itoa(g.InFlight), strconv.Itoa(g.EffectiveCap), strconv.Itoa(g.Cap))
	}
	return Ratio(g.InFlight, g.Cap)
}

// BuildOverview assembles the overview: the global gate when capped, then for every
// connection the gates on its path (its provider gate when capped, its connection gate,
// its model gates by model id) with the bottleneck marked, and the last-minute counts
// and sparklines from History.
func BuildOverview(in OverviewInput) Overview {
	now := in.Now
	byKey := make(map[string]live.Gate, len(in.Gates))
	for _, g := range in.Gates {
		byKey[g.Key] = g
	}
	// the snapshot closest to one minute ago (or the oldest one, if younger)
	var minuteAgo map[string]live.Gate
	for _, s := range in.History {
		if minuteAgo == nil || !s.At.After(now.Add(-time.Minute)) {
			minuteAgo = indexGates(s.Gates)
		}
	}
	history := make([]map[string]live.Gate, 0, len(in.History)+1)
	for _, s := range in.History {
		history = append(history, indexGates(s.Gates))
	}
	history = append(history, byKey)

	bar := func(g live.Gate, label string) GateBar {
		b := GateBar{Gate: g, Label: label}
		if old, ok := minuteAgo[g.Key]; ok {
			b.RejectedLastMinute = max(0, (g.Timeouts+g.QueueFull)-(old.Timeouts+old.QueueFull))
		}
		if len(in.History) > 0 {
			oldest := history[0][g.Key]
			waits := g.Waits.Since(&oldest.Waits)
			b.WaitP50, b.HasWait = waits.Quantile(0.5)
			b.WaitP99, _ = waits.Quantile(0.99)
		}
		for _, h := range history {
			s := h[g.Key]
			b.Samples = append(b.Samples, Sample{InFlight: s.InFlight, Queued: s.Queued})
		}
		return b
	}

	out := Overview{LiveURL: in.LiveURL, LiveIntervalMs: in.LiveIntervalMs, Cluster: in.Cluster}
	if out.LiveIntervalMs <= 0 {
		out.LiveIntervalMs = 2000
	}
	var lastMinute live.WaitHistogram
	for _, g := range in.Gates {
		if g.Shadow {
			continue
		}
		out.Summary.Queued += g.Queued
		if g.Level == live.LevelConnection {
			out.Summary.InFlight += g.InFlight
			if minuteAgo != nil {
				// a gate missing a minute ago is new since: all its counts are recent
				old := minuteAgo[g.Key]
				w := g.Waits.Since(&old.Waits)
				lastMinute.Add(&w)
			}
		}
		if old, ok := minuteAgo[g.Key]; ok {
			out.Summary.RejectedLastMinute += max(0, (g.Timeouts+g.QueueFull)-(old.Timeouts+old.QueueFull))
		}
	}
	out.Summary.P99Wait, out.Summary.HasP99Wait = lastMinute.Quantile(0.99)

	for _, g := range in.Gates {
		if g.Level == live.LevelGlobal && g.Cap > 0 {
			out.Global = append(out.Global, bar(g, ""))
		}
	}
	out.GlobalBottleneck = bottleneck(out.Global)
	clients := live.ClientsByID(in.Clients)
	out.GlobalWaiting = waitingAt(out.Global, out.GlobalBottleneck, clients)
	for _, c := range in.Connections {
		blk := ConnectionBlock{ConnectionStatus: c}
		if !c.Enabled {
			blk.Health = HealthDisabled
		}
		// The gates of c's path below the global one, by their fields: the gateway
		// names each gate's provider, connection and model.
		var provider, connGate *live.Gate
		var models []GateBar
		for i, g := range in.Gates {
			switch {
			case g.Shadow:
				if g.ConnectionID == c.ID {
					blk.Shadows = append(blk.Shadows, bar(g, g.Model))
				}
			case g.Level == live.LevelProvider && g.Provider == c.Provider:
				provider = &in.Gates[i]
			case g.Level == live.LevelConnection && g.ConnectionID == c.ID:
				connGate = &in.Gates[i]
			case g.Level == live.LevelModel && g.ConnectionID == c.ID:
				models = append(models, bar(g, g.Model))
			}
		}
		if provider != nil && provider.Cap > 0 {
			blk.Gates = append(blk.Gates, bar(*provider, c.Provider))
		}
		if connGate != nil {
			blk.Gates = append(blk.Gates, bar(*connGate, ""))
		} else {
			// The gateway does not know c yet (it was just created): an empty
			// gate, which the next page load shows with its numbers.
			blk.Gates = append(blk.Gates, bar(live.Gate{Level: live.LevelConnection, ConnectionID: c.ID, Provider: c.Provider}, ""))
		}
		slices.SortFunc(models, func(a, b GateBar) int { return cmp.Compare(a.Label, b.Label) })
		slices.SortFunc(blk.Shadows, func(a, b GateBar) int { return cmp.Compare(a.Label, b.Label) })
		blk.Gates = append(blk.Gates, models...)
		blk.Bottleneck = bottleneck(blk.Gates)
		blk.Waiting = waitingAt(blk.Gates, blk.Bottleneck, clients)
		out.Connections = append(out.Connections, blk)
	}
	return out
}

func indexGates(gs []live.Gate) map[string]live.Gate {
	m := make(map[string]live.Gate, len(gs))
	for _, g := range gs {
		m[g.Key] = g
	}
	return m
}

// bottleneck returns the key of the gate with the most waiters (the outermost on a
// tie), or "" when nobody waits. Each waiter is parked on exactly one gate — the one
// that blocks it — so a gate's queue is the number of waiters it blocks.
func bottleneck(gates []GateBar) string {
	key, most := "", 0
	for _, g := range gates {
		if g.Queued > most {
			key, most = g.Key, g.Queued
		}
	}
	return key
}

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
