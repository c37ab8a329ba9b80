package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// Tracing (OpenTelemetry). Per proxied request the gateway makes:
//
//   - a server span "<operation> <model>" (gen_ai.operation.name, gen_ai.provider.name,
//     gen_ai.request.model, gen_ai.response.model, gen_ai.usage.input_tokens,
//     gen_ai.usage.output_tokens, gatehouse.client, gatehouse.priority, gatehouse.connection,
//     http.route, http.response.status_code), continuing an incoming W3C traceparent;
//   - a child "gatehouse.admission" per connection choice, covering the queue wait
//     (gatehouse.gate, gatehouse.queue_ms);
//   - a client span per upstream attempt (http.request.method, server.address,
//     server.port, http.response.status_code, gatehouse.connection,
//     gen_ai.request.model), whose context goes upstream in traceparent.
//
// With no tracer (Options.TracerProvider nil or a no-op one) g.tracer is nil
// and the request path only tests that: no span, no context, no allocation.
// Everything that allocates for tracing lives in this file, behind that test.

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/gatehouse-dev/gatehouse/gateway"

// Attribute keys beyond OpenTelemetry's own.
const (
	attrClient     = attribute.Key("gatehouse.client")
	attrConnection = attribute.Key("gatehouse.connection")
	attrGate       = attribute.Key("gatehouse.gate")
	attrQueueMs    = attribute.Key("gatehouse.queue_ms")
	attrPriority   = attribute.Key("gatehouse.priority")
)

// propagator reads and writes W3C traceparent/tracestate; it is fixed (not
// otel's global) so that a library elsewhere cannot change what goes upstream.
var propagator = propagation.TraceContext{}

// newTracer returns the gateway's tracer from tp, nil when tracing is off.
func newTracer(tp trace.TracerProvider) trace.Tracer {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return nil
	}
	return tp.Tracer(tracerName)
}

// operation is gen_ai.operation.name for a route: the GenAI conventions'
// chat, text_completion and embeddings; the Responses API and Anthropic's
// Messages are chat APIs, so chat as well (http.route tells them apart);
// count_tokens is no inference and keeps a name of its own (Gemini's
// countTokens too); Gemini's generateContent is the conventions'
// generate_content.
func (r route) operation() string {
	switch r {
	case routeCompletions:
		return "text_completion"
	case routeEmbeddings:
		return "embeddings"
	case routeCountTokens, routeGeminiCount:
		return "count_tokens"
	case routeGenerate, routeStreamGenerate:
		return "generate_content"
	}
	return "chat"
}

// statusWriter records the status code sent to the client, for the server
// span. Unwrap lets http.ResponseController reach the connection's Flush.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// serverSpan is the span of one traced request.
type serverSpan struct {
	span trace.Span
	sw   *statusWriter
}

// startServerSpan starts the server span of a proxied route (nil for the
// model listings and unknown paths) and returns the writer and request to
// serve with: the span in the request's context, the status recorded.
func (g *Gateway) startServerSpan(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, *serverSpan) {
	rt, ok := routeOf(r.URL.Path)
	if !ok || rt >= numRoutes {
		return w, r, nil
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	op := rt.operation()
	ctx, span := g.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", r.URL.Path),
		))
	sw := &statusWriter{ResponseWriter: w}
	return sw, r.WithContext(ctx), &serverSpan{span: span, sw: sw}
}

// prepared names the span after the request's model, and the client, once
// prepare has read them.
func (ss *serverSpan) prepared(x *exchange) {
	if x.keyName != "" {
		ss.span.SetAttributes(attrClient.String(x.keyName))
	}
	if x.key != nil {
		ss.span.SetAttributes(attrPriority.String(x.priority.String()))
	}
	if x.info.Model != "" {
		ss.span.SetName(x.rt.operation() + " " + x.info.Model)
		ss.span.SetAttributes(attribute.String("gen_ai.request.model", x.info.Model))
	}
}

// traceID is the span's trace id, for the request log.
func (ss *serverSpan) traceID() string {
	if tid := ss.span.SpanContext().TraceID(); tid.IsValid() {
		return tid.String()
	}
	return ""
}

// end records the outcome and ends the span.
func (ss *serverSpan) end(x *exchange) {
	if st := ss.sw.status; st != 0 {
		ss.span.SetAttributes(attribute.Int("http.response.status_code", st))
		if st >= 500 {
			ss.span.SetStatus(codes.Error, http.StatusText(st))
		}
	}
	if x != nil && x.waited > 0 {
		ss.span.SetAttributes(attrQueueMs.Int64(x.waited.Milliseconds()))
	}
	ss.span.End()
}

// chooseTraced is choose inside a gatehouse.admission span.
func (x *exchange) chooseTraced() *apiError {
	_, span := x.g.tracer.Start(x.r.Context(), "gatehouse.admission")
	before := x.waited
	aerr := x.choose()
	x.endAdmission(span, x.cur, aerr, x.waited-before)
	return aerr
}

// endAdmission records which gate held the request back, if any, and how long.
func (x *exchange) endAdmission(span trace.Span, p pick, aerr *apiError, waited time.Duration) {
	gate := ""
	if b, ok := p.permit.(interface{ BlockedBy() string }); ok && p.t != nil {
		gate = b.BlockedBy()
	}
	if aerr != nil && aerr.Gate != "" {
		gate = aerr.Gate
	}
	if gate != "" {
		span.SetAttributes(attrGate.String(gate))
	}
	span.SetAttributes(attrQueueMs.Int64(waited.Milliseconds()))
	if aerr != nil && aerr != errClientGone {
		span.SetStatus(codes.Error, aerr.Code)
	}
	if p.t != nil {
		span.SetAttributes(attrConnection.String(p.t.c.name))
	}
	span.End()
}

// startAttempt starts the client span of an upstream attempt on t to u and
// writes its context into the outbound headers hdr, over any traceparent
// the client sent: the upstream's parent is this attempt.
func (x *exchange) startAttempt(ctx context.Context, t *target, u *url.URL, hdr http.Header) (context.Context, trace.Span) {
	method := x.r.Method
	ctx, span := x.g.tracer.Start(ctx, method+" "+u.Path, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("server.address", u.Hostname()),
			attrConnection.String(t.c.name),
			attribute.String("gen_ai.provider.name", t.c.provider),
			attribute.String("gen_ai.request.model", t.model),
		))
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			span.SetAttributes(attribute.Int("server.port", n))
		}
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(hdr))
	return ctx, span
}

// attemptAnswered records an attempt's upstream status (or its error), on
// the client span and, as the connection that answered, on the server span.
func (x *exchange) attemptAnswered(span trace.Span, t *target, resp *http.Response, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "upstream connection error")
		span.SetAttributes(attribute.String("error.type", "transport"))
		return
	}
	status := resp.StatusCode
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 400 {
		span.SetStatus(codes.Error, http.StatusText(status))
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
	}
	trace.SpanFromContext(x.r.Context()).SetAttributes(
		attrConnection.String(t.c.name),
		attribute.String("gen_ai.provider.name", t.c.provider),
		attribute.String("gen_ai.response.model", t.model),
	)
}

// attemptUsage puts the tokens the upstream reported on the server span.
func (x *exchange) attemptUsage(tap *usage.Tap) {
	if tap == nil {
		return
	}
	in, out, ok := tap.Reported()
	if !ok {
		return
	}
	trace.SpanFromContext(x.r.Context()).SetAttributes(
		attribute.Int64("gen_ai.usage.input_tokens", in),
		attribute.Int64("gen_ai.usage.output_tokens", out),
	)
}
