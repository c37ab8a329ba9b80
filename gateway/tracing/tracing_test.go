package tracing

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// attrs returns a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestNoTracerWhenOff(t *testing.T) {
	if New(nil) != nil || New(noop.NewTracerProvider()) != nil {
		t.Fatal("a nil or no-op provider must turn tracing off")
	}
}

// TestOneRequestsSpans follows one request: a server span continuing the
// client's traceparent, an admission span, an attempt whose context goes
// upstream, and the outcome on each.
func TestOneRequestsSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := New(tp)

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.Header.Set("traceparent", parent)
	rw := httptest.NewRecorder()
	w, r, srv := StartServer(tr, rw, r, "chat")
	if got := srv.TraceID(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("trace id %q: the client's traceparent was not continued", got)
	}
	srv.Prepared("team", "batch", "glm-5")

	adm := StartAdmission(tr, r.Context())
	EndAdmission(adm, "model:c1:glm-5", 1500*time.Millisecond, "", "zai")

	hdr := http.Header{}
	u, _ := url.Parse("http://upstream.test:8443/v1/chat/completions")
	a := Attempt{Connection: "zai", Provider: "z", Model: "glm-5-upstream"}
	_, att := StartAttempt(tr, r.Context(), http.MethodPost, u, a, hdr)
	if tp := hdr.Get("traceparent"); len(tp) != len(parent) || tp[3:35] != "4bf92f3577b34da6a3ce929d0e0e4736" || tp == parent {
		t.Fatalf("upstream traceparent %q: want the attempt's span in the same trace", tp)
	}
	Answered(r.Context(), att, a, &http.Response{StatusCode: 429}, nil)
	att.End()
	Usage(r.Context(), 10, 20, 7, 2)
	w.WriteHeader(http.StatusTooManyRequests)
	srv.End(1500 * time.Millisecond)

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	server, admission, attempt := byName["chat glm-5"], byName["gatehouse.admission"], byName["POST /v1/chat/completions"]
	if server == nil || admission == nil || attempt == nil {
		t.Fatalf("span names %v", byName)
	}
	sa := attrs(server)
	for k, want := range map[attribute.Key]any{
		"gatehouse.client": "team", "gatehouse.priority": "batch", "gen_ai.request.model": "glm-5",
		"http.response.status_code": int64(429), "gatehouse.queue_ms": int64(1500),
		"gatehouse.connection": "zai", "gen_ai.response.model": "glm-5-upstream",
		"gen_ai.usage.input_tokens": int64(10), "gen_ai.usage.output_tokens": int64(20),
		"gen_ai.usage.cache_read.input_tokens": int64(7), "gen_ai.usage.cache_creation.input_tokens": int64(2),
	} {
		if got := sa[k].AsInterface(); got != want {
			t.Errorf("server %s = %v, want %v", k, got, want)
		}
	}
	if server.Status().Code == codes.Error {
		t.Error("a 429 is not a server error")
	}
	aa := attrs(admission)
	if aa["gatehouse.gate"].AsString() != "model:c1:glm-5" || aa["gatehouse.queue_ms"].AsInt64() != 1500 || admission.Status().Code == codes.Error {
		t.Errorf("admission attrs %v status %v", aa, admission.Status())
	}
	ta := attrs(attempt)
	if ta["server.port"].AsInt64() != 8443 || ta["server.address"].AsString() != "upstream.test" ||
		ta["error.type"].AsString() != "429" || attempt.Status().Code != codes.Error {
		t.Errorf("attempt attrs %v status %v", ta, attempt.Status())
	}
}

func TestRefusalsAndTransportErrors(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := New(tp)
	ctx := context.Background()
	adm := StartAdmission(tr, ctx)
	EndAdmission(adm, "", 0, "SEMAPHORE_TIMEOUT", "")
	u, _ := url.Parse("http://upstream.test/v1")
	_, att := StartAttempt(tr, ctx, http.MethodPost, u, Attempt{}, http.Header{})
	Answered(ctx, att, Attempt{}, nil, errors.New("dial refused"))
	att.End()
	w, r, srv := StartServer(tr, httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v1/messages", nil), "chat")
	_ = r
	w.WriteHeader(http.StatusBadGateway)
	srv.End(0)
	got := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		got[s.Name()] = s
	}
	if s := got["gatehouse.admission"]; s.Status().Code != codes.Error || s.Status().Description != "SEMAPHORE_TIMEOUT" {
		t.Errorf("refused admission status %v", s.Status())
	}
	if s := got["POST /v1"]; attrs(s)["error.type"].AsString() != "transport" || s.Status().Code != codes.Error {
		t.Errorf("transport error attempt %v", attrs(s))
	}
	if s := got["chat"]; s.Status().Code != codes.Error || hasAttr(s, "gatehouse.queue_ms") {
		t.Errorf("502 server span %v %v", s.Status(), attrs(s))
	}
}

func hasAttr(s sdktrace.ReadOnlySpan, k attribute.Key) bool {
	_, ok := attrs(s)[k]
	return ok
}

func TestIncomingTraceID(t *testing.T) {
	for v, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":    "",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "",
		"": "",
	} {
		h := http.Header{}
		if v != "" {
			h["Traceparent"] = []string{v}
		}
		if got := IncomingTraceID(h); got != want {
			t.Errorf("IncomingTraceID(%q) = %q, want %q", v, got, want)
		}
	}
}
