package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestTracingEnabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_SERVICE_NAME": "gw"}, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, want: false},
	} {
		if got := tracingEnabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("tracingEnabled(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestServeTracesToOTLP: gatehouse serve with OTEL_EXPORTER_OTLP_ENDPOINT set sends a
// proxied request's spans over OTLP/HTTP protobuf, as service "gatehouse", labelled with
// the client key's name, and flushes them on exit (the batch delay is far longer than
// the test, so only the flush at shutdown can deliver them).
func TestServeTracesToOTLP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var reqs []*coltracepb.ExportTraceServiceRequest
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		reqs = append(reqs, &req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer rc.Close()

	up := startUpstream(t, upstreamtest.Options{})
	env := []string{
		"GATEHOUSE_DATABASE_URL=" + storetest.URL(t),
		"GATEHOUSE_SECRET_KEY=" + store.GenerateSecretKey(),
		"GATEHOUSE_BOOTSTRAP_API_TOKEN=" + e2eToken,
		"GATEHOUSE_BOOTSTRAP_CLIENT_KEY=" + e2eClientKey,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.URL,
		"OTEL_BSP_SCHEDULE_DELAY=600000",
	}
	p := startServe(t, privateDir(t, nil), nil, env)
	createConnection(t, p, up.URL(), "{}")
	waitFor(t, 10*time.Second, "the connection routed", func() bool {
		code, err := chat(t.Context(), p, "glm-5")
		return err == nil && code == http.StatusOK
	})
	mu.Lock()
	early := len(reqs)
	mu.Unlock()
	if early != 0 {
		t.Fatalf("%d exports before shutdown; want the batch held until the flush at exit", early)
	}
	p.interrupt(t, 30*time.Second)

	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, req := range reqs {
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if s.Name != "chat glm-5" {
						continue
					}
					found = true
					if service != "gatehouse" {
						t.Errorf("service.name = %q, want gatehouse", service)
					}
					client := ""
					for _, kv := range s.Attributes {
						if kv.Key == "gatehouse.client" {
							client = kv.Value.GetStringValue()
						}
					}
					if client != "bootstrap" {
						t.Errorf("gatehouse.client = %q, want the bootstrap key's name", client)
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("no \"chat glm-5\" span exported by exit (%d exports)\nstderr:\n%s", len(reqs), p.stderr)
	}
}
