package web

import (
	"cmp"
	"slices"
	"strconv"
	"time"

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
	// GlobalWaiting are the client keys waiting at the global gate, and
	// GlobalWaitingByPriority its queue by class.
	GlobalWaiting           []WaitingKey
	GlobalWaitingByPriority map[string]int
	Connections             []ConnectionBlock
	LiveURL                 string
	LiveIntervalMs          int
	// Cluster is set in cluster mode only; the summary's counts are then cluster-wide.
	Cluster *live.Cluster
	// Traffic is the request log's last minute and today (set by the handler).
	Traffic Traffic
	// Chart is the requests chart over the chosen range (set by the handler).
	Chart OverviewChart
	// Cache is prompt-cache use per key, connection and model (set by the
	// handler; nil with the request log off).
	Cache *CacheView
	// KeyCaps are the client keys with requests waiting at their own cap
	// (maxConcurrent), most waiting first.
	KeyCaps []KeyCapWait
	// Cost ranks models, providers, connections and keys by cost (set by
	// the handler; nil with the request log off).
	Cost *CostView
}

// OverviewChart is the overview's requests chart and its time ranges.
type OverviewChart struct {
	Range  string   // the chosen range: "15m", "1h", "24h" or "7d"
	Ranges []Option // every range, for the links
	Chart  Chart
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
	// WaitWindow is how far back P99Wait looks: from the history sample
	// closest to a minute ago (the oldest, when none is that old) to now; 0
	// without history.
	WaitWindow time.Duration
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
	// WaitingByPriority is the bottleneck's queue by priority class (live.Gate).
	WaitingByPriority map[string]int
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
	// WaitWindow is how far back WaitP50 and WaitP99 look (the oldest history
	// sample to now); 0 when it is not known (the page then names none).
	WaitWindow time.Duration
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
	StateIdle      = "idle"      // nothing in flight
	StateBusy      = "busy"      // in flight, room to spare
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
	case g.InFlight > 0:
		return StateBusy
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
	var (
		minuteAgo   map[string]live.Gate
		minuteAgoAt time.Time
	)
	for _, s := range in.History {
		if minuteAgo == nil || !s.At.After(now.Add(-time.Minute)) {
			minuteAgo, minuteAgoAt = indexGates(s.Gates), s.At
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
			b.WaitWindow = max(0, now.Sub(in.History[0].At))
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
	if minuteAgo != nil {
		out.Summary.WaitWindow = max(0, now.Sub(minuteAgoAt))
	}

	out.KeyCaps = keyCapWaits(in.Gates, in.Clients)
	for _, g := range in.Gates {
		if g.Level == live.LevelGlobal && g.Cap > 0 {
			out.Global = append(out.Global, bar(g, ""))
		}
	}
	out.GlobalBottleneck = bottleneck(out.Global)
	clients := live.ClientsByID(in.Clients)
	out.GlobalWaiting = waitingAt(out.Global, out.GlobalBottleneck, clients)
	out.GlobalWaitingByPriority = priorityAt(out.Global, out.GlobalBottleneck)
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
		blk.WaitingByPriority = priorityAt(blk.Gates, blk.Bottleneck)
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
