package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// alertSink is a local webhook receiver: every alert body it got.
type alertSink struct {
	mu     sync.Mutex
	bodies []map[string]any
	srv    *httptest.Server
}

func newAlertSink(t *testing.T) *alertSink {
	t.Helper()
	s := &alertSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("alert body %q: %v", b, err)
		}
		s.mu.Lock()
		s.bodies = append(s.bodies, m)
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// of returns the bodies of event, in arrival order.
func (s *alertSink) of(event string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, b := range s.bodies {
		if b["event"] == event {
			out = append(out, b)
		}
	}
	return out
}

// withAlerts gives the gateway a notifier; the returned func flushes it:
// it emits a marker event and waits for its delivery, so that every event
// emitted before has been claimed (one queue, one dispatcher) and sent.
func withAlerts(t *testing.T, sink *alertSink) (envOption, func()) {
	t.Helper()
	n := alert.New(t.Context(), alert.Options{DashboardURL: "http://dash.example"})
	t.Cleanup(n.Close)
	marks := 0
	flush := func() {
		t.Helper()
		marks++
		n.Emit(alert.Event{Name: limits.AlertClusterDegraded, Subject: "mark", Condition: time.Duration(marks).String()})
		waitFor(t, minWait, "the marker alert", func() bool { return len(sink.of(limits.AlertClusterDegraded)) == marks })
		waitFor(t, minWait, "every delivery recorded", func() bool {
			ds, _ := n.Recent(t.Context(), 1000)
			for _, d := range ds {
				if d.Status != alert.StatusDelivered {
					return false
				}
			}
			return true
		})
	}
	return func(o *Options) { o.Alerts = n }, flush
}

func alertSettings(sink *alertSink) limits.AlertWebhooks {
	return limits.AlertWebhooks{{Name: "ops", URL: sink.srv.URL, Format: "json", Events: limits.AlertEvents}}
}

// TestAlertBudgetThreshold: a key with a budgetUsdDaily of $1 spends $0.80
// in one request (80 %: the first budget.threshold alert), then 50 requests
// of $0.00001 each, every one settled at 80 % and within the cooldown
// (nothing more), then $0.20 (100 %: the second alert); 50 more requests
// (refused, the budget spent) alert nothing more. Exactly two alerts, each
// naming the key, the period and the level.
func TestAlertBudgetThreshold(t *testing.T) {
	t.Parallel()
	sink := newAlertSink(t)
	opt, flush := withAlerts(t, sink)
	budget := limits.Micros(1_000_000)
	keys := map[string]ClientKey{"sk-a": {ID: "ka", Name: "agent-a", Enabled: true, Limits: limits.ClientKeyLimits{BudgetUSDDaily: &budget}}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), opt)
	price := limits.Micros(10_000_000) // $10 per million tokens
	for key, tokens := range map[string]int{"k-big": 80_000, "k-small": 1, "k-top": 20_000} {
		e.mustBehave(key, upstreamtest.Behavior{UsageTokens: tokens})
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("big", "k-big", "big"), e.conn("small", "k-small", "small"),
		e.conn("top", "k-top", "top")}, ClientKeys: keyConfig(keys),
		Settings: limits.Settings{Alerts: alertSettings(sink), Prices: limits.Prices{"big": {Input: &price, Output: &price},
			"small": {Input: &price, Output: &price}, "top": {Input: &price, Output: &price}}}})
	ctx := testCtx(t)
	ask := func(model string, want int) {
		t.Helper()
		if r := e.post(ctx, "/v1/chat/completions", chatBodyMax(model, 8), "Authorization", "Bearer sk-a"); r.status != want {
			t.Fatalf("%s request = %d %s, want %d", model, r.status, r.body, want)
		}
	}
	alerts := func() int { return len(sink.of(limits.AlertBudgetThreshold)) }
	ask("big", http.StatusOK)
	flush()
	if alerts() != 1 {
		t.Fatalf("after spending 80 %%: %d budget alerts, want 1", alerts())
	}
	for range 50 {
		ask("small", http.StatusOK)
	}
	flush()
	if alerts() != 1 {
		t.Fatalf("after 50 more requests at 80 %%: %d budget alerts, want still 1", alerts())
	}
	ask("top", http.StatusOK)
	flush()
	if alerts() != 2 {
		t.Fatalf("after spending 100 %%: %d budget alerts, want 2", alerts())
	}
	for range 50 {
		e.post(ctx, "/v1/chat/completions", chatBodyMax("small", 8), "Authorization", "Bearer sk-a")
	}
	flush()
	got := sink.of(limits.AlertBudgetThreshold)
	if len(got) != 2 {
		t.Fatalf("%d budget.threshold alerts, want 2: %v", len(got), got)
	}
	for i, pct := range []float64{80, 100} {
		d, _ := got[i]["details"].(map[string]any)
		if got[i]["subject"] != "agent-a" || d["percent"] != pct || d["period"] != "daily" || got[i]["dashboardUrl"] != "http://dash.example/keys/ka" {
			t.Errorf("alert %d = %v, want agent-a daily %v%%", i+1, got[i], pct)
		}
	}
}

// TestAlertConnectionSuspended: an upstream answering 401 suspends the
// connection and alerts connection.health once, with the connection's name
// and the reason; 50 more requests alert nothing more.
func TestAlertConnectionSuspended(t *testing.T) {
	t.Parallel()
	sink := newAlertSink(t)
	opt, flush := withAlerts(t, sink)
	e := newEnv(t, upstreamtest.Options{}, opt)
	if err := e.up.SetKeyBehavior("k1", upstreamtest.Behavior{Fail: "401"}); err != nil {
		t.Fatal(err)
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, Settings: limits.Settings{Alerts: alertSettings(sink)}})
	ctx := testCtx(t)
	for range 51 {
		e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), "Authorization", "Bearer "+testClientKey)
	}
	flush()
	got := sink.of(limits.AlertConnectionHealth)
	if len(got) != 1 {
		t.Fatalf("%d connection.health alerts, want 1: %v", len(got), got)
	}
	d, _ := got[0]["details"].(map[string]any)
	if got[0]["subject"] != "conn-c1" || d["state"] != "suspended" || d["reason"] != "upstream 401" || got[0]["severity"] != "critical" {
		t.Errorf("alert = %v, want conn-c1 suspended for upstream 401", got[0])
	}
}

// TestAlertSessionGuard: a session refused for looping alerts session.guard
// (looping) once; 50 more refused requests alert nothing more.
func TestAlertSessionGuard(t *testing.T) {
	t.Parallel()
	sink := newAlertSink(t)
	opt, flush := withAlerts(t, sink)
	keys := map[string]ClientKey{"sk-a": {ID: "ka", Name: "agent-a", Enabled: true}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), opt)
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, ClientKeys: keyConfig(keys),
		Settings: limits.Settings{LoopLimit: ptr(3), Alerts: alertSettings(sink)}})
	ctx := testCtx(t)
	bodies := transcript("glm-5", false, loopingTurns("call", 6))
	refused := 0
	for _, b := range bodies {
		if r := e.post(ctx, "/v1/chat/completions", b, withSession("sk-a", "loopy")...); r.status == http.StatusForbidden {
			refused++
		}
	}
	last := bodies[len(bodies)-1]
	for range 50 {
		if r := e.post(ctx, "/v1/chat/completions", last, withSession("sk-a", "loopy")...); r.status == http.StatusForbidden {
			refused++
		}
	}
	if refused < 51 {
		t.Fatalf("%d requests refused, want the loop's and the 50 after it", refused)
	}
	flush()
	got := sink.of(limits.AlertSessionGuard)
	if len(got) != 1 {
		t.Fatalf("%d session.guard alerts, want 1: %v", len(got), got)
	}
	d, _ := got[0]["details"].(map[string]any)
	if d["state"] != "looping" || d["key"] != "agent-a" {
		t.Errorf("alert = %v, want agent-a's session looping", got[0])
	}
}

// TestAlertReceiverHangsRequestsFlow: with a webhook that never answers,
// requests that alert keep being answered. Twenty connections answer 401,
// one model each, with a healthy connection behind them: each request
// suspends one (one connection.health event) and fails over. The first
// event reaches the receiver, which holds it and never answers; the 19
// requests after it each emit another event and are all answered 200 via
// the healthy connection. Each event is delivered on its own (none waits
// behind the held one): the receiver ends up holding all 20, every
// delivery still sending, none dropped.
func TestAlertReceiverHangsRequestsFlow(t *testing.T) {
	t.Parallel()
	got := make(chan struct{}, 100)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	reg := prometheus.NewRegistry()
	n := alert.New(t.Context(), alert.Options{Queue: 8, Registerer: reg})
	defer n.Close()
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Alerts = n })
	const bads = 20
	var conns []Connection
	var models []string
	for i := range bads {
		m := "m-" + strconv.Itoa(i)
		models = append(models, m)
		e.mustBehave("bad-"+strconv.Itoa(i), upstreamtest.Behavior{Fail: "401"})
		c := e.conn("bad-"+strconv.Itoa(i), "bad-"+strconv.Itoa(i), m)
		c.Priority = 10
		conns = append(conns, c)
	}
	conns = append(conns, e.conn("good", "k1", models...))
	hooks := limits.AlertWebhooks{{Name: "hang", URL: hang.URL, Format: "slack", Events: []string{limits.AlertConnectionHealth}}}
	e.gw.Apply(Config{Connections: conns, Settings: limits.Settings{Alerts: hooks}})
	ctx := testCtx(t)
	ask := func(i int) {
		t.Helper()
		r := e.post(ctx, "/v1/chat/completions", chatBody(models[i], false), "Authorization", "Bearer "+testClientKey)
		if r.status != http.StatusOK || r.header.Get(HeaderConnection) != "conn-good" {
			t.Fatalf("request %d = %d via %q %s, want 200 failed over to conn-good", i+1, r.status, r.header.Get(HeaderConnection), r.body)
		}
	}
	ask(0)
	<-got // the receiver holds the first alert and never answers
	for i := 1; i < bads; i++ {
		ask(i)
	}
	for i := range bads {
		if h := e.health("bad-" + strconv.Itoa(i)); h.Health != live.HealthSuspended {
			t.Fatalf("conn-bad-%d is %s, want suspended (its request alerted)", i, h.Health)
		}
	}
	// Counted, not timed: each delivery holds the receiver on its own.
	waitFor(t, minWait, "the receiver to hold every alert", func() bool { return len(got) == bads-1 })
	emitted := counterValue(t, reg, "gatehouse_alerts_emitted_total")
	if dropped := counterValue(t, reg, "gatehouse_alerts_dropped_total"); emitted != bads || dropped != 0 {
		t.Errorf("%v events queued and %v dropped, want all %d queued", emitted, dropped, bads)
	}
	ds, _ := n.Recent(t.Context(), 100)
	sending := 0
	for _, d := range ds {
		if d.Status == alert.StatusSending {
			sending++
		}
	}
	if len(ds) != bads || sending != bads {
		t.Errorf("%d deliveries, %d of them sending; want %d, all still sending", len(ds), sending, bads)
	}
}

// counterValue sums the samples of counter name in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestAlertBreakerAndLongCooling: a breaker opened by 503s and a cooldown
// of 10 minutes after a 429 each alert connection.health once; a 429
// cooling for 5 s does not.
func TestAlertBreakerAndLongCooling(t *testing.T) {
	t.Parallel()
	sink := newAlertSink(t)
	opt, flush := withAlerts(t, sink)
	e := newEnv(t, upstreamtest.Options{}, opt)
	for k, b := range map[string]upstreamtest.Behavior{"k-brk": {Fail: "503"},
		"k-cool": {Fail: "429", RetryAfter: 10 * time.Minute}, "k-short": {Fail: "429", RetryAfter: 5 * time.Second}} {
		if err := e.up.SetKeyBehavior(k, b); err != nil {
			t.Fatal(err)
		}
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("brk", "k-brk", "m-brk"), e.conn("cool", "k-cool", "m-cool"),
		e.conn("short", "k-short", "m-short")},
		Settings: limits.Settings{BreakerFailures: ptr(1), MaxAttempts: ptr(1), Alerts: alertSettings(sink)}})
	ctx := testCtx(t)
	for range 5 {
		for _, m := range []string{"m-brk", "m-cool", "m-short"} {
			e.post(ctx, "/v1/chat/completions", chatBody(m, false), "Authorization", "Bearer "+testClientKey)
		}
	}
	flush()
	got := map[string]string{}
	for _, b := range sink.of(limits.AlertConnectionHealth) {
		d, _ := b["details"].(map[string]any)
		if _, dup := got[b["subject"].(string)]; dup {
			t.Errorf("a second alert for %v", b["subject"])
		}
		got[b["subject"].(string)] = d["state"].(string)
	}
	if diff := cmp.Diff(map[string]string{"conn-brk": "breaker open", "conn-cool": "cooling"}, got); diff != "" {
		t.Errorf("connection.health alerts mismatch (-want +got):\n%s", diff)
	}
}

// TestAlertUsageWindow: a connection whose answers report a usage window at
// or above its drainAtPercent alerts connection.health (usage window) once,
// naming the connection; one below it alerts nothing.
func TestAlertUsageWindow(t *testing.T) {
	t.Parallel()
	sink := newAlertSink(t)
	opt, flush := withAlerts(t, sink)
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, opt, withClock(clock))
	full, roomy := e.anthropicConn("full", 8, true), e.anthropicConn("roomy", 8, true)
	full.Overrides.DrainAtPercent = ptr(90)
	roomy.Overrides.DrainAtPercent = ptr(90)
	e.gw.Apply(Config{Connections: []Connection{full, roomy}, Settings: limits.Settings{Alerts: alertSettings(sink)}})
	reset := clock.Now().Add(2 * time.Hour)
	for id, used := range map[string]float64{"full": 0.92, "roomy": 0.20} {
		if err := e.up.SetKeyBehavior("acct-"+id, upstreamtest.Behavior{Header: anthropicWindow(used, "allowed_warning", reset, clock.Now())}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	// Requests without a session rotate over both accounts.
	seen := map[string]int{}
	for i := range 22 {
		seen[e.served(ctx, "window-"+strconv.Itoa(i), 1)]++
	}
	if seen["conn-full"] == 0 {
		t.Fatalf("the full account served nothing (%v): nothing reported its window", seen)
	}
	flush()
	got := sink.of(limits.AlertConnectionHealth)
	if len(got) != 1 {
		t.Fatalf("%d connection.health alerts, want 1: %v", len(got), got)
	}
	d, _ := got[0]["details"].(map[string]any)
	if got[0]["subject"] != "conn-full" || d["state"] != "usage window" {
		t.Errorf("alert = %v, want conn-full in state usage window", got[0])
	}
}
