package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func TestClientSeriesByStatus(t *testing.T) {
	m := New()
	reg := registered(m)
	c := m.Client("team")
	if m.Client("team") != c {
		t.Fatal("a key's series are bound once and shared")
	}
	c.Request(200)
	c.Request(429)
	c.Request(429)
	c.Tokens(100, 0, 60, 30)
	c.Spend(2500)
	c.Spend(-1) // nothing known: never counted
	for _, tc := range []struct {
		name, labels string
		want         float64
	}{
		{"gatehouse_client_requests_total", `client="team" status="200"`, 1},
		{"gatehouse_client_requests_total", `client="team" status="429"`, 2},
		{"gatehouse_client_tokens_total", `client="team" kind="input"`, 100},
		{"gatehouse_client_tokens_total", `client="team" kind="output"`, 0},
		{"gatehouse_client_tokens_total", `client="team" kind="cache_read"`, 60},
		{"gatehouse_client_tokens_total", `client="team" kind="cache_write"`, 30},
		{"gatehouse_client_spend_usd_total", `client="team"`, 0.0025},
	} {
		if got := value(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s{%s} = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

func TestTargetNoResponseIsError(t *testing.T) {
	m := New()
	reg := registered(m)
	tg := m.Target("zai", "glm-5")
	tg.Count(0)
	tg.Count(200)
	tg.Count(503)
	tg.Count(503)
	for status, want := range map[string]float64{"error": 1, "200": 1, "503": 2} {
		if got := value(t, reg, "gatehouse_upstream_requests_total", `connection="zai" model="glm-5" status="`+status+`"`); got != want {
			t.Errorf("status %s: got %v, want %v", status, got, want)
		}
	}
	m.Forget(map[string]bool{"other": true})
	if n := count(t, reg, "gatehouse_upstream_requests_total"); n != 0 {
		t.Fatalf("a forgotten connection keeps %d series", n)
	}
	if m.Target("zai", "glm-5") == tg {
		t.Fatal("a forgotten connection's series are bound anew")
	}
}

func TestRateRejectedKnownBudgetsOnly(t *testing.T) {
	m := New()
	reg := registered(m)
	m.RateRejected(live.BudgetTPM)
	m.RateRejected("budgetUsdMonthly")
	m.RateRejected("nonsense")
	if got := value(t, reg, "gatehouse_ratelimit_rejections_total", `limit="tpm"`); got != 1 {
		t.Fatalf("tpm rejections = %v, want 1", got)
	}
	if got := value(t, reg, "gatehouse_ratelimit_rejections_total", `limit="budgetUsdMonthly"`); got != 1 {
		t.Fatalf("budgetUsdMonthly rejections = %v, want 1", got)
	}
	if n := count(t, reg, "gatehouse_ratelimit_rejections_total"); n != len(BudgetNames)+len(SpendLimits) {
		t.Fatalf("%d rate-limit series, want the %d budgets bound in advance", n, len(BudgetNames)+len(SpendLimits))
	}
}

// TestBudgetRejectedPerClient: gatehouse_budget_rejections_total counts a
// key's 429s by its name and the budget.
func TestBudgetRejectedPerClient(t *testing.T) {
	m := New()
	reg := registered(m)
	c := m.Client("team-a")
	c.BudgetRejected("budgetUsdDaily")
	c.BudgetRejected("budgetUsdDaily")
	m.Client("team-b").BudgetRejected(live.BudgetTPD)
	if got := value(t, reg, "gatehouse_budget_rejections_total", `budget="budgetUsdDaily" client="team-a"`); got != 2 {
		t.Errorf("team-a budgetUsdDaily = %v, want 2", got)
	}
	if got := value(t, reg, "gatehouse_budget_rejections_total", `budget="tpd" client="team-b"`); got != 1 {
		t.Errorf("team-b tpd = %v, want 1", got)
	}
}

func TestGatesCollectorReadsSnapshot(t *testing.T) {
	snap := live.Snapshot{
		Gates: []live.Gate{
			{Key: "conn:a", Level: "connection", Cap: 4, EffectiveCap: 3, InFlight: 2, Queued: 5},
			{Key: "shadow:a", Shadow: true, WouldQueue: 7},
		},
		Clients:     []live.Client{{Name: "team", InFlight: 1, QueuedByPriority: map[string]int{"batch": 2}}},
		Connections: []live.Connection{{ID: "c1", Name: "a", Health: live.HealthCooling, Budgets: map[string]live.Budget{live.BudgetRPM: {Limit: 10, Remaining: 4}}}},
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewGates(func() live.Snapshot { return snap }))
	for _, tc := range []struct {
		name, labels string
		want         float64
	}{
		{"gatehouse_gate_queued", `key="conn:a" level="connection"`, 5},
		{"gatehouse_gate_effective_capacity", `key="conn:a" level="connection"`, 3},
		{"gatehouse_gate_shadow_would_queue_total", `key="shadow:a"`, 7},
		{"gatehouse_ratelimit_remaining", `connection="a" limit="rpm"`, 4},
		{"gatehouse_connection_health", `connection="a" state="cooling"`, 1},
		{"gatehouse_connection_health", `connection="a" state="ok"`, 0},
		{"gatehouse_client_queued", `client="team" priority="batch"`, 2},
		{"gatehouse_client_inflight", `client="team"`, 1},
	} {
		if got := value(t, reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s{%s} = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	if n := count(t, reg, "gatehouse_gate_queued"); n != 1 {
		t.Errorf("%d queued series, want 1 (a shadow gate is not an admission gate)", n)
	}
}

// series gathers g and returns every series of name by its labels
// (`a="x" b="y"`, sorted by name as the registry sorts them).
func series(t *testing.T, g prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+`="`+lp.GetValue()+`"`)
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[strings.Join(labels, " ")] = v
		}
	}
	return out
}

func value(t *testing.T, g prometheus.Gatherer, name, labels string) float64 {
	t.Helper()
	v, ok := series(t, g, name)[labels]
	if !ok {
		t.Fatalf("no series %s{%s}", name, labels)
	}
	return v
}

func count(t *testing.T, g prometheus.Gatherer, name string) int {
	t.Helper()
	return len(series(t, g, name))
}

// registered returns a registry holding m's series.
func registered(m *Set) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	m.Register(reg, NewGates(func() live.Snapshot { return live.Snapshot{} }))
	return reg
}
