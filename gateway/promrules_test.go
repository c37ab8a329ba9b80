package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/internal/promrulestest"
)

// TestPrometheusAlertRules drives a gateway into the alerting states — a
// key at 80 % of its daily budget, one at 100 %, one refused for a budget
// it cannot afford, a connection suspended by a 401, one whose breaker
// opened on 503s, one cooling for minutes after a 429, one whose usage
// window is 96 % used, an adaptive gate whose learned cap was cut to half, a
// session refused for looping, alert events dropped and a delivery given
// up — scrapes its registry, checks docs/prometheus-alerts.yaml with
// promtool and runs `promtool test rules` over it with the scraped series:
// each of those rules fires with the labels of the series that hold the
// condition and nowhere else (not on the healthy connection, the healthy
// key or the gate that was not cut). The request-log and Redis rules stay
// silent here (this gateway has neither) and fire in
// cmd/gatehouse's TestPrometheusRulesOnServe.
func TestPrometheusAlertRules(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	broke, spent, near := limits.Micros(1), limits.Micros(20_000), limits.Micros(50_000)
	keys := map[string]ClientKey{
		"sk-a":     {ID: "ka", Name: "agent-a", Enabled: true},
		"sk-b":     {ID: "kb", Name: "broke", Enabled: true, Limits: limits.ClientKeyLimits{BudgetUSDDaily: &broke}},
		"sk-spent": {ID: "ks", Name: "spent", Enabled: true, Limits: limits.ClientKeyLimits{BudgetUSDDaily: &spent}},
		"sk-near":  {ID: "kn", Name: "near", Enabled: true, Limits: limits.ClientKeyLimits{BudgetUSDMonthly: &near}},
	}
	e := newEnv(t, upstreamtest.Options{UsageTokens: 1000}, withKeys(keys), func(o *Options) { o.Registerer = reg })
	hold := make(chan struct{})
	var held sync.WaitGroup
	defer held.Wait()
	defer close(hold)
	for k, b := range map[string]upstreamtest.Behavior{"k-sus": {Fail: "401"}, "k-brk": {Fail: "503"},
		"k-cool": {Fail: "429", RetryAfter: 10 * time.Minute}, "k-cut": {Hold: hold, MaxInFlight: 1},
		"acct-full": {Header: anthropicWindow(0.96, "allowed_warning", time.Now().Add(2*time.Hour), time.Now())}} {
		e.mustBehave(k, b)
	}
	cut := e.conn("cut", "k-cut", "m-cut")
	cut.Overrides = caps(4, map[string]int{"m-cut": 3}, 0)
	cut.Overrides.Adaptive = ptr(true)
	price := limits.Micros(10_000_000) // $10 per million tokens: 1000 tokens cost $0.01
	e.gw.Apply(Config{Connections: []Connection{e.conn("sus", "k-sus", "m-sus"), e.conn("brk", "k-brk", "m-brk"),
		e.conn("cool", "k-cool", "m-cool"), e.conn("ok", "k-ok", "glm-5"), cut, e.anthropicConn("full", 8, false)},
		ClientKeys: keyConfig(keys),
		Settings: limits.Settings{LoopLimit: ptr(3), BreakerFailures: ptr(1), BreakerCooldownMs: ptr(3600000),
			MaxAttempts: ptr(1), Prices: limits.Prices{"glm-5": {Input: &price, Output: &price}}}})
	ctx := testCtx(t)
	as := func(key string) []string { return []string{"Authorization", "Bearer " + key} }
	for _, m := range []string{"m-sus", "m-brk", "m-cool", "glm-5"} {
		e.post(ctx, "/v1/chat/completions", chatBody(m, false), as("sk-a")...)
	}
	// Budgets: near spends $0.04 of $0.05 a month (80 %), spent $0.02 of
	// $0.02 a day and is refused after, broke can afford no request.
	for key, n := range map[string]int{"sk-near": 4, "sk-spent": 2} {
		for i := range n {
			if r := e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 8), as(key)...); r.status != http.StatusOK {
				t.Fatalf("%s request %d = %d %s, want 200", key, i+1, r.status, r.body)
			}
		}
	}
	for _, key := range []string{"sk-spent", "sk-b"} {
		if r := e.post(ctx, "/v1/chat/completions", chatBodyMax("glm-5", 8), as(key)...); r.status == http.StatusOK {
			t.Fatalf("%s with its budget spent = 200, want refused", key)
		}
	}
	// The adaptive account takes one request at a time: the second one's
	// concurrency 429 cuts the learned cap of connection:cut from 4 to 2.
	held.Go(func() { e.post(ctx, "/v1/chat/completions", chatBody("m-cut", false), as("sk-a")...) })
	if err := e.up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.post(ctx, "/v1/chat/completions", chatBody("m-cut", false), as("sk-a")...)
	if g := e.gate("connection:cut"); g.Cap != 4 || g.EffectiveCap != 2 {
		t.Fatalf("connection:cut cap %d, learned %d; want 4 and 2", g.Cap, g.EffectiveCap)
	}
	e.served(ctx, "window", 1, as("sk-a")...)
	for _, b := range transcript("glm-5", false, loopingTurns("call", 5)) {
		e.post(ctx, "/v1/chat/completions", b, withSession("sk-a", "loopy")...)
	}
	alertsState(t, reg)

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	promrulestest.Evaluate(t, "../docs/prometheus-alerts.yaml", fams, map[string][]map[string]string{
		"GatehouseBudgetThreshold": {{"client": "near", "budget": "budgetUsdMonthly"}},
		"GatehouseBudgetSpent": {{"client": "spent", "budget": "budgetUsdDaily"},
			{"client": "broke", "budget": "budgetUsdDaily"}},
		"GatehouseConnectionSuspended":   {{"connection": "conn-sus", "state": "suspended"}},
		"GatehouseConnectionBreakerOpen": {{"connection": "conn-brk", "state": "breaker-open"}},
		"GatehouseConnectionCooling":     {{"connection": "conn-cool", "state": "cooling"}},
		"GatehouseConnectionUsageWindow": {{"connection": "conn-full", "window": "5h"}},
		"GatehouseLearnedCapCut":         {{"level": "connection", "key": "connection:cut"}},
		"GatehouseSessionGuard":          {{"reason": "loop"}},
		"GatehouseAlertsDropped":         {{}},
		"GatehouseAlertDeliveryFailed":   {{"status": "failed"}},
	}, map[string]string{
		"GatehouseRequestLogDropped": "cmd/gatehouse TestPrometheusRulesOnServe",
		"GatehouseClusterDegraded":   "cmd/gatehouse TestPrometheusRulesOnServe",
	})
}

// alertsState registers a notifier on reg and gets one alert event
// dropped (a full queue) and one delivery given up (a webhook answering 500
// through every backoff, waited at once).
func alertsState(t *testing.T, reg prometheus.Registerer) {
	t.Helper()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer bad.Close()
	n := alert.New(t.Context(), alert.Options{Registerer: reg, Queue: 1,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	defer n.Close()
	n.Configure(limits.AlertWebhooks{{Name: "bad", URL: bad.URL, Format: "json", Events: []string{limits.AlertClusterDegraded}}}, 0)
	for i := range 50 {
		n.Emit(alert.Event{Name: limits.AlertClusterDegraded, Subject: fmt.Sprint(i)})
	}
	waitFor(t, minWait, "a delivery given up", func() bool {
		ds, _ := n.Recent(t.Context(), 100)
		for _, d := range ds {
			if d.Status == alert.StatusFailed {
				return true
			}
		}
		return false
	})
}
