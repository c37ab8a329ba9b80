package gateway

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// Tracing (OpenTelemetry; the spans and their attributes are package
// tracing's): what the request flow tells each span. With no tracer
// g.tracer is nil and the request path only tests that.

// startServerSpan starts the server span of a proxied route (nil for the
// model listings and unknown paths) and returns the writer and request to
// serve with.
func (g *Gateway) startServerSpan(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, *tracing.Server) {
	rt, ok := route.Of(r.URL.Path)
	if !ok || rt >= route.Num {
		return w, r, nil
	}
	return tracing.StartServer(g.tracer, w, r, rt.Operation())
}

// spanPrepared tells the server span the request's model, client and
// class once prepare has read them.
func (x *exchange) spanPrepared() {
	prio := ""
	if x.key != nil {
		prio = x.priority.String()
	}
	x.span.Prepared(x.keyName, prio, x.info.Model)
	if x.aff.session != "" {
		x.span.Session(x.aff.session)
	}
}

// chooseTraced is choose inside a gatehouse.admission span.
func (x *exchange) chooseTraced() *apiError {
	span := tracing.StartAdmission(x.g.tracer, x.r.Context())
	before := x.waited
	aerr := x.choose()
	x.endAdmission(span, x.cur, aerr, x.waited-before)
	return aerr
}

// endAdmission records which gate held the request back, if any, and how long.
func (x *exchange) endAdmission(span trace.Span, p pick, aerr *apiError, waited time.Duration) {
	gate, code, conn := "", "", ""
	if b, ok := p.permit.(interface{ BlockedBy() string }); ok && p.t != nil {
		gate = b.BlockedBy()
	}
	if aerr != nil && aerr.Gate != "" {
		gate = aerr.Gate
	}
	if aerr != nil && aerr != errClientGone {
		code = aerr.Code
	}
	if p.t != nil {
		conn = p.t.c.name
	}
	tracing.EndAdmission(span, gate, waited, code, conn)
}

// spanAttempt is what t's client span says of it.
func spanAttempt(t *target) tracing.Attempt {
	return tracing.Attempt{Connection: t.c.name, Provider: t.c.provider, Model: t.model}
}

// startAttempt starts the client span of an upstream attempt on t to u and
// writes its context into the outbound headers hdr.
func (x *exchange) startAttempt(ctx context.Context, t *target, u *url.URL, hdr http.Header) (context.Context, trace.Span) {
	return tracing.StartAttempt(x.g.tracer, ctx, x.r.Method, u, spanAttempt(t), hdr)
}

// attemptUsage puts the tokens the upstream reported on the server span.
func (x *exchange) attemptUsage(tap *usage.Tap) {
	if tap == nil {
		return
	}
	if u := tap.Counts(); u.Found {
		tracing.Usage(x.r.Context(), u.Input, u.Output, u.CacheRead, u.CacheWrite)
	}
}
