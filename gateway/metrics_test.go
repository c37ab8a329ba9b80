package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// metricValue finds the value of the series name with exactly labels.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Registerer = reg })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(4, map[string]int{"glm-5": 2, "idle-model": 7}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	if r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
		t.Fatalf("status %d", r.status)
	}
	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{name: "model cap", metric: "gatehouse_gate_capacity", labels: map[string]string{"key": "model:c1:glm-5", "level": "model"}, want: 2},
		{name: "idle model cap listed", metric: "gatehouse_gate_capacity", labels: map[string]string{"key": "model:c1:idle-model"}, want: 7},
		{name: "connection cap", metric: "gatehouse_gate_capacity", labels: map[string]string{"key": "connection:c1"}, want: 4},
		{name: "in flight back to 0", metric: "gatehouse_gate_inflight", labels: map[string]string{"key": "connection:c1"}, want: 0},
		{name: "upstream 200", metric: "gatehouse_upstream_requests_total", labels: map[string]string{"connection": "conn-c1", "model": "glm-5", "status": "200"}, want: 1},
		{name: "attempts", metric: "gatehouse_admission_attempts_total", want: 1},
		{name: "waits observed", metric: "gatehouse_admission_wait_seconds", want: 1},
		{name: "overhead observed", metric: "gatehouse_gateway_overhead_seconds", want: 1},
		{name: "upstream duration", metric: "gatehouse_upstream_duration_seconds", labels: map[string]string{"connection": "conn-c1"}, want: 1},
		{name: "no rejections", metric: "gatehouse_admission_rejections_total", labels: map[string]string{"reason": "timeout"}, want: 0},
		{name: "health ok", metric: "gatehouse_connection_health", labels: map[string]string{"connection": "conn-c1", "state": "ok"}, want: 1},
		{name: "health not suspended", metric: "gatehouse_connection_health", labels: map[string]string{"connection": "conn-c1", "state": "suspended"}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := metricValue(t, reg, tc.metric, tc.labels)
			if !ok {
				t.Fatalf("no series %s%v", tc.metric, tc.labels)
			}
			if got != tc.want {
				t.Errorf("%s%v = %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		})
	}
}

// A client that leaves while queued waited in admission: none of that wait may show up
// in gatehouse_gateway_overhead_seconds (DESIGN.md: admission wait excluded).
func TestOverheadExcludesWaitOfClientThatLeft(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newEnv(t, upstreamtest.Options{Latency: 2 * time.Second}, func(o *Options) { o.Registerer = reg })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	cancel, release, first, queued := e.holdAndQueue(t)
	// The scenario, not a synchronisation: the client stays queued for 500 ms, then leaves.
	stay := time.NewTimer(500 * time.Millisecond)
	<-stay.C
	cancel()
	<-queued
	waitFor(t, 10*time.Second, "the left request observed", func() bool {
		n, _ := metricValue(t, reg, "gatehouse_gateway_overhead_seconds", nil)
		return n >= 1
	})
	if sum := histogramSum(t, reg, "gatehouse_gateway_overhead_seconds"); sum >= 0.25 {
		t.Errorf("overhead sum = %.3f s after a client left a 500 ms queue wait, want well under 0.25 s (the wait is not overhead)", sum)
	}
	release()
	<-first
}

// histogramSum is the sample sum of the histogram name (no labels).
func histogramSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("histogram %s not found", name)
	return 0
}
