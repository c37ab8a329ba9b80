// Package metrics owns the gateway's Prometheus series: the counters and
// histograms the request path bumps (their labels bound in advance, so the
// hot path never formats a label) and the collector that reads gates,
// clients and connection health from a live snapshot at scrape time. It
// never decides anything: it only counts what the gateway reports.
package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// Set holds the gateway's Prometheus series. Gate gauges and connection
// health are read at scrape time by collectors, so the hot path only
// touches counters and histograms whose labels are bound in advance.
type Set struct {
	WaitSeconds      prometheus.Histogram
	rejections       *prometheus.CounterVec
	RejectTimeout    prometheus.Counter
	RejectQueueFull  prometheus.Counter
	Attempts         prometheus.Counter
	upstreamRequests *prometheus.CounterVec
	UpstreamDuration *prometheus.HistogramVec
	Overhead         prometheus.Histogram
	rateRejections   *prometheus.CounterVec
	rateRejectBy     map[string]prometheus.Counter // by budget name, bound in advance
	budgetRejections *prometheus.CounterVec
	ClientRequests   *prometheus.CounterVec
	ClientTokens     *prometheus.CounterVec
	clientSpend      *prometheus.CounterVec
	affinity         *prometheus.CounterVec
	// Affinity counts requests by what the connection choice did with their
	// affinity binding, indexed hit, bound, spilled, none.
	Affinity [4]prometheus.Counter

	mu      sync.Mutex
	targets map[[2]string]*Target
	clients map[string]*Client // by key name
}

// Client holds the pre-bound series of one client key (by name).
type Client struct {
	vec      *prometheus.CounterVec
	name     string
	ok       prometheus.Counter // status 200, bound in advance
	in, out  prometheus.Counter
	read     prometheus.Counter // cache reads
	write    prometheus.Counter // cache writes
	usd      prometheus.Counter // spend in dollars
	budgets  *prometheus.CounterVec
	mu       sync.RWMutex
	byStatus map[int]prometheus.Counter
}

// Request counts one answered request of the key with its status.
func (c *Client) Request(status int) {
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

// Spend counts what a request of the key cost, in micro-dollars.
func (c *Client) Spend(micros int64) {
	if micros > 0 {
		c.usd.Add(float64(micros) / 1e6)
	}
}

// BudgetRejected counts one 429 of the key for its budget (tpm, tpd,
// budgetUsdDaily or budgetUsdMonthly): gatehouse_budget_rejections_total.
// Rejections are the rare path: the series is looked up, not bound.
func (c *Client) BudgetRejected(budget string) {
	c.budgets.WithLabelValues(c.name, budget).Inc()
}

// Tokens counts the tokens an upstream reported for the key: input (every
// prompt token processed), output, and of the input the cache reads and
// writes (kinds input, output, cache_read, cache_write).
func (c *Client) Tokens(in, out, cacheRead, cacheWrite int64) {
	for _, k := range [...]struct {
		ctr prometheus.Counter
		n   int64
	}{{c.in, in}, {c.out, out}, {c.read, cacheRead}, {c.write, cacheWrite}} {
		if k.n > 0 {
			k.ctr.Add(float64(k.n))
		}
	}
}

// Client returns the pre-bound series of the key named name.
func (m *Set) Client(name string) *Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.clients[name]
	if c == nil {
		c = &Client{vec: m.ClientRequests, name: name, byStatus: make(map[int]prometheus.Counter),
			ok:    m.ClientRequests.WithLabelValues(name, "200"),
			in:    m.ClientTokens.WithLabelValues(name, "input"),
			out:   m.ClientTokens.WithLabelValues(name, "output"),
			read:  m.ClientTokens.WithLabelValues(name, "cache_read"),
			write: m.ClientTokens.WithLabelValues(name, "cache_write"),
			usd:   m.clientSpend.WithLabelValues(name), budgets: m.budgetRejections}
		m.clients[name] = c
	}
	return c
}

// Target holds the pre-bound series of one (connection, model).
type Target struct {
	vec         *prometheus.CounterVec
	conn, model string
	ok          prometheus.Counter // status 200, bound in advance
	mu          sync.RWMutex
	byStatus    map[int]prometheus.Counter
}

// Count adds one upstream request with the given status (0 = no response).
func (t *Target) Count(status int) {
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

// New returns the gateway's series, unregistered.
func New() *Set {
	rejections := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gatehouse_admission_rejections_total",
		Help: "Requests rejected by admission, by reason (timeout, queue_full).",
	}, []string{"reason"})
	m := &Set{
		WaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_admission_wait_seconds",
			Help:    "Time an admitted request waited for its concurrency permit.",
			Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}),
		RejectTimeout:   rejections.WithLabelValues("timeout"),
		RejectQueueFull: rejections.WithLabelValues("queue_full"),
		Attempts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatehouse_admission_attempts_total",
			Help: "Admission Attempts (one per connection tried for a request).",
		}),
		upstreamRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_upstream_requests_total",
			Help: "Requests dispatched upstream, by connection, upstream model and status (error = no response).",
		}, []string{"connection", "model", "status"}),
		UpstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gatehouse_upstream_duration_seconds",
			Help:    "Upstream time per attempt, from dispatch to the end of the response body.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"connection"}),
		Overhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatehouse_gateway_overhead_seconds",
			Help:    "Time spent in Gatehouse itself per request, admission wait and upstream time excluded.",
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05},
		}),
		rateRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_ratelimit_rejections_total",
			Help: "Requests answered 429 RATE_LIMIT_* or BUDGET_EXCEEDED by the gateway's own limits, by limit (rpm, rpd, tpm, tpd, budgetUsdDaily, budgetUsdMonthly).",
		}, []string{"limit"}),
		budgetRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_budget_rejections_total",
			Help: "Requests of a client key (by name) answered 429 for one of its budgets (tpm, tpd, budgetUsdDaily, budgetUsdMonthly).",
		}, []string{"client", "budget"}),
		ClientRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_client_requests_total",
			Help: "Requests answered per client key (by name) and HTTP status.",
		}, []string{"client", "status"}),
		ClientTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_client_tokens_total",
			Help: "Tokens the upstreams reported per client key (by name), by kind: input (every prompt token processed), output, and of the input cache_read and cache_write.",
		}, []string{"client", "kind"}),
		clientSpend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_client_spend_usd_total",
			Help: "What the answered requests of each client key (by name) cost, in US dollars, at the prices setting.",
		}, []string{"client"}),
		affinity: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatehouse_affinity_total",
			Help: "Requests by what the connection choice did with their session's affinity binding: hit (followed it), bound (first turn, bound now), spilled (bound connection busy or draining, served and bound elsewhere), none (no binding followed or written).",
		}, []string{"result"}),
		targets: make(map[[2]string]*Target),
		clients: make(map[string]*Client),
	}
	m.rateRejectBy = make(map[string]prometheus.Counter, len(BudgetNames)+len(SpendLimits))
	for _, b := range append(BudgetNames[:], SpendLimits[:]...) {
		m.rateRejectBy[b] = m.rateRejections.WithLabelValues(b)
	}
	for i, r := range AffinityResults {
		m.Affinity[i] = m.affinity.WithLabelValues(r)
		m.Affinity[i].Add(0)
	}
	m.RejectQueueFull.Add(0)
	m.RejectTimeout.Add(0)
	m.rejections = rejections
	return m
}

// RateRejected counts one RATE_LIMIT_* or BUDGET_EXCEEDED answer for the
// named budget (BudgetNames, SpendLimits).
func (m *Set) RateRejected(budget string) {
	if c := m.rateRejectBy[budget]; c != nil {
		c.Inc()
	}
}

// AffinityResults are gatehouse_affinity_total's results, in Set.Affinity's order.
var AffinityResults = [...]string{"hit", "bound", "spilled", "none"}

// BudgetNames are the rate-limit windows in a fixed order.
var BudgetNames = [...]string{live.BudgetRPM, live.BudgetRPD, live.BudgetTPM, live.BudgetTPD}

// SpendLimits are a key's money budgets, by their limit's name.
var SpendLimits = [...]string{limits.KeyBudgetUSDDaily, limits.KeyBudgetUSDMonthly}

// Target returns the pre-bound series of (connection, model), shared by
// every snapshot that routes there.
func (m *Set) Target(conn, model string) *Target {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{conn, model}
	t := m.targets[k]
	if t == nil {
		t = &Target{vec: m.upstreamRequests, conn: conn, model: model, byStatus: make(map[int]prometheus.Counter)}
		t.ok = m.upstreamRequests.WithLabelValues(conn, model, "200")
		m.targets[k] = t
	}
	return t
}

// Forget drops the series of connections no longer configured.
func (m *Set) Forget(keep map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.targets {
		if !keep[k[0]] {
			delete(m.targets, k)
			m.upstreamRequests.DeletePartialMatch(prometheus.Labels{"connection": k[0]})
			m.UpstreamDuration.DeletePartialMatch(prometheus.Labels{"connection": k[0]})
		}
	}
}

// Register adds every series to reg.
func (m *Set) Register(reg prometheus.Registerer, gates prometheus.Collector) {
	reg.MustRegister(m.WaitSeconds, m.rejections, m.Attempts, m.upstreamRequests,
		m.UpstreamDuration, m.Overhead, m.rateRejections, m.budgetRejections, m.ClientRequests, m.ClientTokens, m.clientSpend, m.affinity, gates)
}
