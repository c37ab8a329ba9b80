package gateway

import (
	"strconv"
	"sync"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway's Prometheus series. Gate gauges and connection
// health are read at scrape time by collectors, so the hot path only
// touches counters and histograms whose labels are bound in advance.
type metrics struct {
	waitSeconds      prometheus.Histogram
	rejections       *prometheus.CounterVec
	rejectTimeout    prometheus.Counter
	rejectQueueFull  prometheus.Counter
	attempts         prometheus.Counter
	upstreamRequests *prometheus.CounterVec
	upstreamDuration *prometheus.HistogramVec
	overhead         prometheus.Histogram
	rateRejections   *prometheus.CounterVec
	rateRejectBy     map[string]prometheus.Counter // by budget name, bound in advance
	clientRequests   *prometheus.CounterVec
	clientTokens     *prometheus.CounterVec
	clientSpend      *prometheus.CounterVec

	mu      sync.Mutex
	targets map[[2]string]*targetMetrics
	clients map[string]*clientMetrics // by key name
}

// clientMetrics are the pre-bound series of one client key (by name).
type clientMetrics struct {
	vec      *prometheus.CounterVec
	name     string
	ok       prometheus.Counter // status 200, bound in advance
	in, out  prometheus.Counter
	usd      prometheus.Counter // spend in dollars
	mu       sync.RWMutex
	byStatus map[int]prometheus.Counter
}

// request counts one answered request of the key with its status.
func (c *clientMetrics) request(status int) {
	if status == 200 {
		c.ok.Inc()
		return
	}
	c.mu.RLock()
	ctr := c.byStatus[status]
	c.mu.RUnlock()
	if ctr == nil {
		ctr = c.vec.WithLabelValues(c.name, strconv.Itoa(status))
		c.mu.Lock()
		c.byStatus[status] = ctr
		c.mu.Unlock()
	}
	ctr.Inc()
}

// spend counts what a request of the key cost, in micro-dollars.
func (c *clientMetrics) spend(micros int64) {
	if micros > 0 {
		c.usd.Add(float64(micros) / 1e6)
	}
}

// tokens counts the input and output tokens an upstream reported for the key.
func (c *clientMetrics) tokens(in, out int64) {
	if in > 0 {
		c.in.Add(float64(in))
	}
	if out > 0 {
		c.out.Add(float64(out))
	}
}

// client returns the pre-bound series of the key named name.
func (m *metrics) client(name string) *clientMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.clients[name]
	if c == nil {
		c = &clientMetrics{vec: m.clientRequests, name: name, byStatus: make(map[int]prometheus.Counter),
			ok:  m.clientRequests.WithLabelValues(name, "200"),
			in:  m.clientTokens.WithLabelValues(name, "input"),
			out: m.clientTokens.WithLabelValues(name, "output"),
			usd: m.clientSpend.WithLabelValues(name)}
		m.clients[name] = c
	}
	return c
}

// targetMetrics are the pre-bound series of one (connection, model).
type targetMetrics struct {
	vec         *prometheus.CounterVec
	conn, model string
	ok          prometheus.Counter // status 200, bound in advance
	mu          sync.RWMutex
	byStatus    map[int]prometheus.Counter
}

// count adds one upstream request with the given status (0 = no response).
func (t *targetMetrics) count(status int) {
	if status == 200 {
		t.ok.Inc()
		return
	}
	t.mu.RLock()
	c := t.byStatus[status]
	t.mu.RUnlock()
	if c == nil {
		label := "error"
		if status > 0 {
			label = strconv.Itoa(status)
		}
		c = t.vec.WithLabelValues(t.conn, t.model, label)
		t.mu.Lock()
		t.byStatus[status] = c
		t.mu.Unlock()
	}
	c.Inc()
}

func newMetrics() *metrics {
	rejections := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_admission_rejections_total",
		Help: "Requests rejected by admission, by reason (timeout, queue_full).",
	}, []string{"reason"})
	m := &metrics{
		waitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_admission_wait_seconds",
			Help:    "Time an admitted request waited for its concurrency permit.",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		rejectTimeout:   rejections.WithLabelValues("timeout"),
		rejectQueueFull: rejections.WithLabelValues("queue_full"),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_admission_attempts_total",
			Help: "Admission attempts (one per connection tried for a request).",
		}),
		upstreamRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_upstream_requests_total",
			Help: "Requests dispatched upstream, by connection, upstream model and status (error = no response).",
		}, []string{"connection", "model", "status"}),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_upstream_duration_seconds",
			Help:    "Upstream time per attempt, from dispatch to the end of the response body.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"connection"}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_gateway_overhead_seconds",
			Help:    "Time spent in Gatehouse itself per request, admission wait and upstream time excluded.",
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05},
		}),
		rateRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_ratelimit_rejections_total",
			Help: "Requests answered 429 RATE_LIMIT_* by the gateway's own rate limits, by limit (rpm, rpd, tpm, tpd).",
		}, []string{"limit"}),
		clientRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_client_requests_total",
			Help: "Requests answered per client key (by name) and HTTP status.",
		}, []string{"client", "status"}),
		clientTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_client_tokens_total",
			Help: "Tokens the upstreams reported per client key (by name), by kind (input, output).",
		}, []string{"client", "kind"}),
		clientSpend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_client_spend_usd_total",
			Help: "What the answered requests of each client key (by name) cost, in US dollars, at the prices setting.",
		}, []string{"client"}),
		targets: make(map[[2]string]*targetMetrics),
		clients: make(map[string]*clientMetrics),
	}
	m.rateRejectBy = make(map[string]prometheus.Counter, 4)
	for _, b := range budgetNames {
		m.rateRejectBy[b] = m.rateRejections.WithLabelValues(b)
	}
	m.rejectQueueFull.Add(0)
	m.rejectTimeout.Add(0)
	m.rejections = rejections
	return m
}

// rateRejected counts one RATE_LIMIT_* answer for the named budget.
func (m *metrics) rateRejected(budget string) {
	if c := m.rateRejectBy[budget]; c != nil {
		c.Inc()
	}
}

// budgetNames are the rate-limit windows in a fixed order.
var budgetNames = [...]string{live.BudgetRPM, live.BudgetRPD, live.BudgetTPM, live.BudgetTPD}

// target returns the pre-bound series of (connection, model), shared by
// every snapshot that routes there.
func (m *metrics) target(conn, model string) *targetMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{conn, model}
	t := m.targets[k]
	if t == nil {
		t = &targetMetrics{vec: m.upstreamRequests, conn: conn, model: model, byStatus: make(map[int]prometheus.Counter)}
		t.ok = m.upstreamRequests.WithLabelValues(conn, model, "200")
		m.targets[k] = t
	}
	return t
}

// forget drops the series of connections no longer configured.
func (m *metrics) forget(keep map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.targets {
		if !keep[k[0]] {
			delete(m.targets, k)
			m.upstreamRequests.DeletePartialMatch(prometheus.Labels{"connection": k[0]})
			m.upstreamDuration.DeletePartialMatch(prometheus.Labels{"connection": k[0]})
		}
	}
}

// gatesCollector reports admission gates and connection health at scrape time.
type gatesCollector struct {
	g                         *Gateway
	inflight, queued, capDesc *prometheus.Desc
	effCap, wouldQueue        *prometheus.Desc
	health                    *prometheus.Desc
	remaining                 *prometheus.Desc
	clientInflight            *prometheus.Desc
	clientQueued              *prometheus.Desc
}

func newGatesCollector(g *Gateway) *gatesCollector {
	labels := []string{"level", "key"}
	return &gatesCollector{
		g:        g,
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
}

var healthStates = [...]string{live.HealthOK, live.HealthCooling, live.HealthSuspended, live.HealthBreakerOpen, live.HealthHalfOpen}

// Collect implements prometheus.Collector.
func (c *gatesCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.g.Snapshot()
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
		for _, name := range budgetNames {
			if b, ok := cs.Budgets[name]; ok {
				ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(b.Remaining), label, name)
			}
		}
	}
}

// register adds every series to reg.
func (m *metrics) register(reg prometheus.Registerer, gates prometheus.Collector) {
	reg.MustRegister(m.waitSeconds, m.rejections, m.attempts, m.upstreamRequests,
		m.upstreamDuration, m.overhead, m.rateRejections, m.clientRequests, m.clientTokens, m.clientSpend, gates)
}
