package gateway

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// ruleFile is the part of a Prometheus rules file the test reads.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestPrometheusAlertRules drives a gateway into the alerting states — a
// connection suspended by a 401, one whose breaker opened on 503s, one
// cooling for minutes after a 429, a key refused for its spent budget, a
// session refused for looping, alert events dropped and a delivery given
// up — scrapes its registry, and runs `promtool test rules` over
// docs/prometheus-alerts.yaml with the scraped series: each of those rules
// fires with the labels of the series that hold the condition and nowhere
// else (not on the healthy connection). The learned-cap and request-log
// rules are evaluated too, and must stay silent here: the gateway cuts no
// learned cap and owns no request log in this test.
func TestPrometheusAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (apt-get install prometheus; scripts/test installs it)")
	}
	reg := prometheus.NewRegistry()
	budget := limits.Micros(1)
	keys := map[string]ClientKey{
		"sk-a": {ID: "ka", Name: "agent-a", Enabled: true},
		"sk-b": {ID: "kb", Name: "broke", Enabled: true, Limits: limits.ClientKeyLimits{BudgetUSDDaily: &budget}},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), func(o *Options) { o.Registerer = reg })
	for k, b := range map[string]upstreamtest.Behavior{"k-sus": {Fail: "401"}, "k-brk": {Fail: "503"},
		"k-cool": {Fail: "429", RetryAfter: 10 * time.Minute}} {
		if err := e.up.SetKeyBehavior(k, b); err != nil {
			t.Fatal(err)
		}
	}
	price := limits.Micros(10_000_000)
	e.gw.Apply(Config{Connections: []Connection{e.conn("sus", "k-sus", "m-sus"), e.conn("brk", "k-brk", "m-brk"),
		e.conn("cool", "k-cool", "m-cool"), e.conn("ok", "k-ok", "glm-5")}, ClientKeys: keyConfig(keys),
		Settings: limits.Settings{LoopLimit: ptr(3), BreakerFailures: ptr(1), BreakerCooldownMs: ptr(3600000),
			MaxAttempts: ptr(1), Prices: limits.Prices{"glm-5": {Input: &price, Output: &price}}}})
	ctx := testCtx(t)
	auth := []string{"Authorization", "Bearer sk-a"}
	for _, m := range []string{"m-sus", "m-brk", "m-cool", "glm-5"} {
		e.post(ctx, "/v1/chat/completions", chatBody(m, false), auth...)
	}
	e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), "Authorization", "Bearer sk-b")
	for _, b := range transcript("glm-5", false, loopingTurns("call", 5)) {
		e.post(ctx, "/v1/chat/completions", b, withSession("sk-a", "loopy")...)
	}
	alertsState(t, reg)

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string][]string{} // metric name → its series in promtool's notation
	values := map[string]string{}   // series → promtool values
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			s := f.GetName() + labelText(m.GetLabel())
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
				values[s] = fmt.Sprintf("0 0 0 0 0 %g %g", v, v) // rises at 5m
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
				values[s] = strings.TrimSpace(strings.Repeat(fmt.Sprintf("%g ", v), 7))
			default:
				continue
			}
			series[f.GetName()] = append(series[f.GetName()], s)
		}
	}
	raw, err := os.ReadFile("../docs/prometheus-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules ruleFile
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	// The series each rule must fire on, as scraped from the gateway.
	want := map[string][]map[string]string{
		"GatehouseConnectionSuspended":   {{"connection": "conn-sus", "state": "suspended"}},
		"GatehouseConnectionBreakerOpen": {{"connection": "conn-brk", "state": "breaker-open"}},
		"GatehouseConnectionCooling":     {{"connection": "conn-cool", "state": "cooling"}},
		"GatehouseBudgetSpent":           {{"client": "broke", "budget": "budgetUsdDaily"}},
		"GatehouseSessionGuard":          {{"reason": "loop"}},
		"GatehouseAlertsDropped":         {{}},
		"GatehouseAlertDeliveryFailed":   {{"status": "failed"}},
	}
	var input strings.Builder
	for _, name := range slices.Sorted(maps.Keys(series)) {
		for _, s := range series[name] {
			fmt.Fprintf(&input, "      - series: '%s'\n        values: '%s'\n", s, values[s])
		}
	}
	var tests strings.Builder
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			fmt.Fprintf(&tests, "      - eval_time: 5m\n        alertname: %s\n        exp_alerts:\n", r.Alert)
			exp, ok := want[r.Alert]
			if !ok {
				tests.WriteString("          []\n") // not driven here (see the test's doc)
				continue
			}
			for _, lbls := range exp {
				all := map[string]string{}
				for k, v := range lbls {
					all[k] = v
				}
				for k, v := range r.Labels {
					all[k] = v
				}
				fmt.Fprintf(&tests, "          - exp_labels: %s\n            exp_annotations: %s\n", yamlMap(all), yamlMap(expand(r.Annotations, all)))
			}
		}
	}
	dir := t.TempDir()
	rulesPath, err := filepath.Abs("../docs/prometheus-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := "rule_files:\n  - " + rulesPath + "\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
		input.String() + "    alert_rule_test:\n" + tests.String()
	testPath := filepath.Join(dir, "rules_test.yaml")
	if err := os.WriteFile(testPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), promtool, "test", "rules", testPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n--- test file:\n%s", err, out, doc)
	}
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

func labelText(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func yamlMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

var labelRef = regexp.MustCompile(`\{\{ \$labels\.([a-z_]+) \}\}`)

// expand fills in the rule's {{ $labels.x }} references, as Prometheus does.
func expand(ann map[string]string, labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ann {
		out[k] = labelRef.ReplaceAllStringFunc(v, func(ref string) string {
			return labels[labelRef.FindStringSubmatch(ref)[1]]
		})
	}
	return out
}
