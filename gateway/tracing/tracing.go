package tracing

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
)

// Name is the instrumentation scope of the gateway's spans.
const Name = "github.com/gatehouse-dev/gatehouse/gateway"

// Attribute keys beyond OpenTelemetry's own.
const (
	attrClient     = attribute.Key("gatehouse.client")
	attrConnection = attribute.Key("gatehouse.connection")
	attrGate       = attribute.Key("gatehouse.gate")
	attrQueueMs    = attribute.Key("gatehouse.queue_ms")
	attrPriority   = attribute.Key("gatehouse.priority")
	attrSession    = attribute.Key("gatehouse.session")
)

// propagator reads and writes W3C traceparent/tracestate; it is fixed (not
// otel's global) so that a library elsewhere cannot change what goes upstream.
var propagator = propagation.TraceContext{}

// New returns the gateway's tracer from tp, nil when tracing is off.
func New(tp trace.TracerProvider) trace.Tracer {
	switch tp.(type) {
	case nil, noop.TracerProvider, *noop.TracerProvider:
		return nil
	}
	return tp.Tracer(Name)
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

// Server is the span of one traced request.
type Server struct {
	span trace.Span
	sw   *statusWriter
	op   string
}

// StartServer starts the server span of a request whose gen_ai operation is
// op and returns the writer and request to serve with: the span in the
// request's context, the status recorded.
func StartServer(t trace.Tracer, w http.ResponseWriter, r *http.Request, op string) (http.ResponseWriter, *http.Request, *Server) {
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.Start(ctx, op, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", r.URL.Path),
		))
	sw := &statusWriter{ResponseWriter: w}
	return sw, r.WithContext(ctx), &Server{span: span, sw: sw, op: op}
}

// Prepared names the span after the request's model, and records its
// client key and class, once the gateway has read them ("" = unknown).
func (s *Server) Prepared(client, priority, model string) {
	if client != "" {
		s.span.SetAttributes(attrClient.String(client))
	}
	if priority != "" {
		s.span.SetAttributes(attrPriority.String(priority))
	}
	if model != "" {
		s.span.SetName(s.op + " " + model)
		s.span.SetAttributes(attribute.String("gen_ai.request.model", model))
	}
}

// Session records the request's session, as stored (its hash).
func (s *Server) Session(hash string) {
	s.span.SetAttributes(attrSession.String(hash))
}

// TraceID is the span's trace id, for the request log.
func (s *Server) TraceID() string {
	if tid := s.span.SpanContext().TraceID(); tid.IsValid() {
		return tid.String()
	}
	return ""
}

// IncomingTraceID is the trace id of an incoming W3C traceparent
// ("00-<32 hex>-<16 hex>-<flags>") in h, "" when there is none: the request
// log's trace id when tracing is off. The id is a substring of the header:
// no allocation.
func IncomingTraceID(h http.Header) string {
	v := h["Traceparent"]
	if len(v) == 0 || len(v[0]) < 55 || v[0][2] != '-' || v[0][35] != '-' {
		return ""
	}
	return v[0][3:35]
}

// End records the answer's status and the time queued, and ends the span.
func (s *Server) End(waited time.Duration) {
	if st := s.sw.status; st != 0 {
		s.span.SetAttributes(attribute.Int("http.response.status_code", st))
		if st >= 500 {
			s.span.SetStatus(codes.Error, http.StatusText(st))
		}
	}
	if waited > 0 {
		s.span.SetAttributes(attrQueueMs.Int64(waited.Milliseconds()))
	}
	s.span.End()
}

// StartAdmission starts the span of one connection choice.
func StartAdmission(t trace.Tracer, ctx context.Context) trace.Span {
	_, span := t.Start(ctx, "gatehouse.admission")
	return span
}

// EndAdmission records which gate held the request back ("" = none), how
// long it waited, the error code it was refused with ("" = admitted) and
// the connection chosen ("" = none), and ends span.
func EndAdmission(span trace.Span, gate string, waited time.Duration, errCode, connection string) {
	if gate != "" {
		span.SetAttributes(attrGate.String(gate))
	}
	span.SetAttributes(attrQueueMs.Int64(waited.Milliseconds()))
	if errCode != "" {
		span.SetStatus(codes.Error, errCode)
	}
	if connection != "" {
		span.SetAttributes(attrConnection.String(connection))
	}
	span.End()
}

// Attempt is what a client span says of an upstream attempt.
type Attempt struct {
	Connection, Provider, Model string
}

// StartAttempt starts the client span of an upstream attempt to u and
// writes its context into the outbound headers hdr, over any traceparent
// the client sent: the upstream's parent is this attempt.
func StartAttempt(t trace.Tracer, ctx context.Context, method string, u *url.URL, a Attempt, hdr http.Header) (context.Context, trace.Span) {
	ctx, span := t.Start(ctx, method+" "+u.Path, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("server.address", u.Hostname()),
			attrConnection.String(a.Connection),
			attribute.String("gen_ai.provider.name", a.Provider),
			attribute.String("gen_ai.request.model", a.Model),
		))
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			span.SetAttributes(attribute.Int("server.port", n))
		}
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(hdr))
	return ctx, span
}

// Answered records an attempt's upstream status (or its transport error)
// on its client span and, as the connection that answered, on the server
// span in server.
func Answered(server context.Context, span trace.Span, a Attempt, resp *http.Response, err error) {
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
	trace.SpanFromContext(server).SetAttributes(
		attrConnection.String(a.Connection),
		attribute.String("gen_ai.provider.name", a.Provider),
		attribute.String("gen_ai.response.model", a.Model),
	)
}

// Usage puts the tokens the upstream reported on the server span in server:
// input (every prompt token processed), output, and of the input the cache
// reads and writes.
func Usage(server context.Context, in, out, cacheRead, cacheWrite int64) {
	trace.SpanFromContext(server).SetAttributes(
		attribute.Int64("gen_ai.usage.input_tokens", in),
		attribute.Int64("gen_ai.usage.output_tokens", out),
		attribute.Int64("gen_ai.usage.cache_read.input_tokens", cacheRead),
		attribute.Int64("gen_ai.usage.cache_creation.input_tokens", cacheWrite),
	)
}
