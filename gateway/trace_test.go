package gateway

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every
// ExportTraceServiceRequest posted to /v1/traces and keeps the spans.
type otlpReceiver struct {
	t   *testing.T
	url string

	mu    sync.Mutex
	spans []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want protobuf on /v1/traces", http.StatusBadRequest)
			return
		}
		b, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &req)
		}
		if err != nil {
			t.Errorf("OTLP receiver: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rc.spans = append(rc.spans, ss.Spans...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL
	return rc
}

// inTrace returns the spans received of trace id (hex).
func (rc *otlpReceiver) inTrace(id string) []*tracepb.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rc.spans {
		if hex.EncodeToString(s.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

// newTestTracing returns a tracer provider exporting over OTLP/HTTP
// protobuf to rc, shut down (flushed) when the test ends.
func newTestTracing(t *testing.T, rc *otlpReceiver) *sdktrace.TracerProvider {
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(rc.url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Errorf("tracer shutdown: %v", err)
		}
	})
	return tp
}

// newEnvWrapped is newEnv with the fake upstream behind wrap.
func newEnvWrapped(t *testing.T, wrap func(http.Handler) http.Handler, opts ...envOption) *env {
	t.Helper()
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(wrap(up))
	o := Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}}
	for _, f := range opts {
		f(&o)
	}
	gw := New(o)
	gwSrv := httptest.NewServer(gw)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	e := &env{t: t, up: up, upURL: upSrv.URL, gw: gw, gwURL: gwSrv.URL, client: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = up.Close()
		gwSrv.Close()
		gw.Close()
		upSrv.Close()
	})
	return e
}

func spanAttrs(s *tracepb.Span) map[string]string {
	m := make(map[string]string, len(s.Attributes))
	for _, kv := range s.Attributes {
		v := kv.Value
		switch {
		case v.GetStringValue() != "":
			m[kv.Key] = v.GetStringValue()
		default:
			m[kv.Key] = strconv.FormatInt(v.GetIntValue(), 10)
		}
	}
	return m
}

// One queued request, traced: the client's traceparent is continued by the
// server span (GenAI attributes, the client key's name), whose children are
// the admission span (the cap-1 gate that held it back, its queue time) and
// the upstream attempt's client span, and the upstream receives a
// traceparent of that trace whose parent is the attempt — not the one the
// client sent.
func TestTraceQueuedRequest(t *testing.T) {
	rc := newOTLPReceiver(t)
	tp := newTestTracing(t, rc)
	var mu sync.Mutex
	var upParents []string // traceparent as each upstream request arrived
	e := newEnvWrapped(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			upParents = append(upParents, r.Header.Get("Traceparent"))
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}, func(o *Options) {
		o.TracerProvider = tp
		o.Authenticate = func(_ context.Context, secret string) (ClientKey, bool) {
			return ClientKey{ID: "k-team-a", Name: "team-a", Enabled: true}, secret == testClientKey
		}
	})
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(1, nil, 30000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	first := make(chan reply, 1)
	go func() { first <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	waitFor(t, 5*time.Second, "first request in flight", func() bool { return e.gate("connection:c1").InFlight == 1 })

	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	second := make(chan reply, 1)
	go func() {
		second <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), "traceparent", "00-"+traceID+"-"+clientSpan+"-01",
			session.HeaderGatehouse, "trace-session")
	}()
	waitFor(t, 5*time.Second, "second request queued", func() bool { return e.gate("connection:c1").Queued == 1 })
	close(hold)
	if r := <-first; r.status != http.StatusOK {
		t.Fatalf("first request: %d %s", r.status, r.body)
	}
	r := <-second
	if r.status != http.StatusOK {
		t.Fatalf("queued request: %d %s", r.status, r.body)
	}

	// The server span ends after the client has its answer: flush until it is there.
	var spans []*tracepb.Span
	waitFor(t, 10*time.Second, "the queued request's spans exported", func() bool {
		if err := tp.ForceFlush(ctx); err != nil {
			t.Fatalf("force flush: %v", err)
		}
		spans = rc.inTrace(traceID)
		return len(spans) >= 3
	})
	byName := map[string]*tracepb.Span{}
	for _, s := range spans {
		if byName[s.Name] != nil {
			t.Errorf("span %q twice in the trace", s.Name)
		}
		byName[s.Name] = s
	}
	srv, adm := byName["chat glm-5"], byName["gatehouse.admission"]
	var cli *tracepb.Span
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			cli = s
		}
	}
	if srv == nil || adm == nil || cli == nil || len(spans) != 3 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name)
		}
		t.Fatalf("spans in the trace: %q; want the server span \"chat glm-5\", gatehouse.admission and one client span", names)
	}

	if got := hex.EncodeToString(srv.ParentSpanId); got != clientSpan || srv.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("server span: parent %s kind %v, want the client's span %s and SERVER", got, srv.Kind, clientSpan)
	}
	want := map[string]string{
		"gen_ai.operation.name":      "chat",
		"gen_ai.provider.name":       "zai",
		"gen_ai.request.model":       "glm-5",
		"gen_ai.response.model":      "glm-5",
		"gen_ai.usage.input_tokens":  "", // checked below: > 0
		"gen_ai.usage.output_tokens": "",
		"gatehouse.client":           "team-a",
		"gatehouse.connection":       "conn-c1",
		"gatehouse.session":          session.Hash("k-team-a", "trace-session"),
		"http.response.status_code":  "200",
	}
	sa := spanAttrs(srv)
	for k, v := range want {
		got, ok := sa[k]
		switch {
		case !ok:
			t.Errorf("server span has no %s (attributes %v)", k, sa)
		case v == "":
			if n, err := strconv.Atoi(got); err != nil || n <= 0 {
				t.Errorf("server span %s = %q, want a token count", k, got)
			}
		case got != v:
			t.Errorf("server span %s = %q, want %q", k, got, v)
		}
	}

	aa := spanAttrs(adm)
	if !bytesEqual(adm.ParentSpanId, srv.SpanId) {
		t.Errorf("admission span is not a child of the server span")
	}
	if aa["gatehouse.gate"] != "connection:c1" {
		t.Errorf("admission gatehouse.gate = %q, want connection:c1", aa["gatehouse.gate"])
	}
	if q, ok := aa["gatehouse.queue_ms"]; !ok || q != r.header.Get(HeaderQueueMs) {
		t.Errorf("admission gatehouse.queue_ms = %q (present %v), want the %s the client got, %q", q, ok, HeaderQueueMs, r.header.Get(HeaderQueueMs))
	}

	ca := spanAttrs(cli)
	if !bytesEqual(cli.ParentSpanId, srv.SpanId) {
		t.Errorf("client span is not a child of the server span")
	}
	if ca["http.response.status_code"] != "200" || ca["server.address"] != "127.0.0.1" {
		t.Errorf("client span attributes %v, want http.response.status_code 200 and server.address 127.0.0.1", ca)
	}

	mu.Lock()
	defer mu.Unlock()
	wantParent := "00-" + traceID + "-" + hex.EncodeToString(cli.SpanId) + "-01"
	found := false
	for _, p := range upParents {
		found = found || p == wantParent
		if strings.Contains(p, clientSpan) {
			t.Errorf("upstream got the client's own traceparent %q", p)
		}
	}
	if !found {
		t.Errorf("upstream traceparents %q, want one %q (the attempt's span)", upParents, wantParent)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// Without a tracer provider the gateway makes no spans and passes a client's
// traceparent upstream untouched.
func TestTraceOffPassesTraceparent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got string
	e := newEnvWrapped(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = r.Header.Get("Traceparent")
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	if e.gw.tracer != nil {
		t.Fatal("tracer set without a TracerProvider")
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}})
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false), "traceparent", tp); r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	mu.Lock()
	defer mu.Unlock()
	if got != tp {
		t.Errorf("upstream traceparent %q, want the client's %q", got, tp)
	}
}

// count_tokens passes through to the connection serving the model while its
// only slot is taken and its one request of the day is spent: it takes no
// slot, queues nowhere and does not count toward rpd.
func TestCountTokensTakesNoSlot(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	e := newEnvWrapped(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/messages") {
				<-hold // the message holds the connection's one slot
			}
			h.ServeHTTP(w, r)
		})
	})
	c := e.conn("c1", "k1", "claude-x")
	c.APIStyle = "anthropic"
	c.Overrides = caps(1, nil, 30000)
	c.Overrides.RPD = ptr(1)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	body := `{"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	countBody := `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`

	first := make(chan reply, 1)
	go func() { first <- e.post(ctx, "/v1/messages", body, "anthropic-version", "2023-06-01") }()
	waitFor(t, 5*time.Second, "the message holding the slot", func() bool { return e.gate("connection:c1").InFlight == 1 })
	admitted := e.gate("connection:c1").Admitted

	// What the upstream answers when asked directly.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.upURL+"/v1/messages/count_tokens", strings.NewReader(countBody))
	req.Header.Set("x-api-key", "k1")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(direct), `"input_tokens"`) {
		t.Fatalf("fake upstream count_tokens: %d %s", resp.StatusCode, direct)
	}

	for i := range 3 {
		r := e.post(ctx, "/v1/messages/count_tokens", countBody, "anthropic-version", "2023-06-01")
		if r.status != http.StatusOK || r.body != string(direct) {
			t.Fatalf("count_tokens %d: %d %s, want 200 %s", i, r.status, r.body, direct)
		}
		if got := r.header.Get(HeaderConnection); got != "conn-c1" {
			t.Errorf("count_tokens %d: %s = %q, want conn-c1", i, HeaderConnection, got)
		}
	}
	g := e.gate("connection:c1")
	if g.Admitted != admitted || g.InFlight != 1 || g.Queued != 0 {
		t.Errorf("gate after count_tokens: admitted %d (was %d), in flight %d, queued %d; want unchanged, 1, 0",
			g.Admitted, admitted, g.InFlight, g.Queued)
	}
	if b := e.health("c1").Budgets[live.BudgetRPD]; b.Remaining != 0 || b.Limit != 1 {
		t.Errorf("rpd budget %+v, want the message's one request counted, nothing else", b)
	}
	close(hold)
	if r := <-first; r.status != http.StatusOK {
		t.Errorf("message: %d %s", r.status, r.body)
	}
}

// discardExporter drops every span: BenchmarkProxyTraced measures making
// the spans, not shipping them.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkProxyTraced is BenchmarkProxy's plain case with tracing on (all
// sampled, spans batched and dropped): the cost of the spans when on.
// BenchmarkProxy itself runs with tracing off.
// Run with: go test -run '^$' -bench 'BenchmarkProxy' -benchmem ./gateway/
func BenchmarkProxyTraced(b *testing.B) {
	up := upstreamtest.NewServer(upstreamtest.Options{Chunks: 8})
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	defer up.Close()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	},
		TracerProvider: tp})
	defer gw.Close()
	gw.Apply(Config{Connections: []Connection{{
		ID: "c1", Name: "bench", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
		Overrides: caps(256, map[string]int{"glm-5": 256}, 60000),
	}}})
	gwSrv := httptest.NewServer(gw)
	defer gwSrv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body := chatBody("glm-5", false)
	benchPost(b, client, gwSrv.URL+"/v1/chat/completions", testClientKey, body)
}
