package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// gatesCollector reports admission gates and connection health at scrape time.
type gatesCollector struct {
	snapshot                  func() live.Snapshot
	inflight, queued, capDesc *prometheus.Desc
	effCap, wouldQueue        *prometheus.Desc
	health                    *prometheus.Desc
	remaining                 *prometheus.Desc
	clientInflight            *prometheus.Desc
	clientQueued              *prometheus.Desc
	windowUsed                *prometheus.Desc
}

// NewGates returns the collector that reads gates, clients and connection
// health from snapshot at scrape time.
func NewGates(snapshot func() live.Snapshot) prometheus.Collector {
	labels := []string{"level", "key"}
	return &gatesCollector{
		snapshot: snapshot,
		inflight: prometheus.NewDesc("gatehouse_gate_inflight", "Slots held in the gate.", labels, nil),
		queued:   prometheus.NewDesc("gatehouse_gate_queued", "Requests parked on the gate.", labels, nil),
		capDesc:  prometheus.NewDesc("gatehouse_gate_capacity", "Cap of the gate (0 = uncapped).", labels, nil),
		effCap: prometheus.NewDesc("gatehouse_gate_effective_capacity",
			"Cap admission enforces: the learned cap of an adaptive gate, else the cap (0 = uncapped).", labels, nil),
		wouldQueue: prometheus.NewDesc("gatehouse_gate_shadow_would_queue_total",
			"Requests that arrived while a shadow gate was at its shadow cap, since that cap was set.", []string{"key"}, nil),
		health: prometheus.NewDesc("gatehouse_connection_health",
			"1 for the connection's current health state (ok, cooling, suspended, breaker-open, half-open), else 0.",
			[]string{"connection", "state"}, nil),
		remaining: prometheus.NewDesc("gatehouse_ratelimit_remaining",
			"What is left of a connection's rate-limit window (rpm: dispatches this minute; negative tpm: debt).",
			[]string{"connection", "limit"}, nil),
		clientInflight: prometheus.NewDesc("gatehouse_client_inflight",
			"Requests of the client key (by name) holding a permit on this replica.", []string{"client"}, nil),
		clientQueued: prometheus.NewDesc("gatehouse_client_queued",
			"Requests of the client key (by name) waiting for admission on this replica, by the priority class they asked for.",
			[]string{"client", "priority"}, nil),
		windowUsed: prometheus.NewDesc("gatehouse_connection_window_used_ratio",
			"Used fraction (0–1) of a subscription account's usage window (5h, 7d) as its latest answer reported it.",
			[]string{"connection", "window"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *gatesCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inflight
	ch <- c.queued
	ch <- c.capDesc
	ch <- c.effCap
	ch <- c.wouldQueue
	ch <- c.health
	ch <- c.remaining
	ch <- c.clientInflight
	ch <- c.clientQueued
	ch <- c.windowUsed
}

var healthStates = [...]string{live.HealthOK, live.HealthCooling, live.HealthSuspended, live.HealthBreakerOpen, live.HealthHalfOpen}

// Collect implements prometheus.Collector.
func (c *gatesCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.snapshot()
	for _, gs := range snap.Gates {
		if gs.Shadow {
			// Counted, never enforced: not a gate of the admission series.
			ch <- prometheus.MustNewConstMetric(c.wouldQueue, prometheus.CounterValue, float64(gs.WouldQueue), gs.Key)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.effCap, prometheus.GaugeValue, float64(gs.EffectiveCap), gs.Level, gs.Key)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(gs.InFlight), gs.Level, gs.Key)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(gs.Queued), gs.Level, gs.Key)
		ch <- prometheus.MustNewConstMetric(c.capDesc, prometheus.GaugeValue, float64(gs.Cap), gs.Level, gs.Key)
	}
	for _, cl := range snap.Clients {
		ch <- prometheus.MustNewConstMetric(c.clientInflight, prometheus.GaugeValue, float64(cl.InFlight), cl.Name)
		for _, p := range admission.Priorities {
			name := p.String()
			ch <- prometheus.MustNewConstMetric(c.clientQueued, prometheus.GaugeValue, float64(cl.QueuedByPriority[name]), cl.Name, name)
		}
	}
	for _, cs := range snap.Connections {
		label := cs.Name
		if label == "" {
			label = cs.ID
		}
		for _, st := range healthStates {
			v := 0.0
			if st == cs.Health {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.health, prometheus.GaugeValue, v, label, st)
		}
		for _, name := range BudgetNames {
			if b, ok := cs.Budgets[name]; ok {
				ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(b.Remaining), label, name)
			}
		}
		for _, w := range cs.Windows {
			ch <- prometheus.MustNewConstMetric(c.windowUsed, prometheus.GaugeValue, w.Used, label, w.Name)
		}
	}
}
