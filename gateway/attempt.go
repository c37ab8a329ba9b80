package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// errExecTimeout is the cause of an attempt's context when its execution
// bound fires.
var errExecTimeout = errors.New("gateway: execution bound reached")

// upstreamStatusError feeds an upstream 408/5xx to the breaker.
type upstreamStatusError int

func (e upstreamStatusError) Error() string {
	return "gateway: upstream status " + strconv.Itoa(int(e))
}

// lastResponse is an upstream error response kept while failing over.
type lastResponse struct {
	status int
	header http.Header
	body   []byte
	label  string
}

// attemptResult is what an attempt did.
type attemptResult uint8

const (
	attemptAnswered attemptResult = iota // the client has its answer (or is gone)
	attemptFailed                        // dispatched and failed: try the next connection
	attemptSkipped                       // not dispatched, a budget ran out: try the next, no attempt spent
)

// wantsUsage reports whether an attempt on t must ask the upstream for
// stream usage the client did not ask for: an OpenAI chat or legacy
// completion stream to a connection with tpm or tpd, for a key with token
// or money budgets, or of a priced model (its cost, cache reads included,
// goes to the request log and the key's spend). The gateway then adds
// stream_options.include_usage and strips the usage chunk from the stream.
func (x *exchange) wantsUsage(t *target) bool {
	return (x.rt == route.Chat || x.rt == route.Completions) && x.info.Stream && !x.info.IncludeUsage &&
		(t.c.lim.CountsTokens() || x.key.Lim.CountsTokens() || x.key.Lim.Spends() || t.rate.Found)
}

// payload returns the body to send for upstream model m: the client's bytes,
// or a copy with the model value replaced and, with addUsage,
// stream_options.include_usage set. A Gemini body names no model (the URL
// does): it always goes as it is.
func (x *exchange) payload(m string, addUsage bool) []byte {
	if (m == x.info.Model && !addUsage) || x.st == wire.Gemini {
		return x.body.Raw
	}
	if x.body.altM != m || x.body.altUsage != addUsage || len(x.body.alt) == 0 {
		// An earlier attempt's Transport may still be reading the old
		// copy: never write over it.
		x.body.alt = usage.RewriteBody(nil, x.body.Raw, x.info, m, addUsage)
		x.body.altM, x.body.altUsage = m, addUsage
	}
	return x.body.alt
}

// release gives back a permit: an attempt's that is over, or one that is not
// used after all. A cluster permit's release is a Redis round trip: it is
// queued (ReleaseSoon), not waited for, so neither the answer's last bytes
// nor the client's next request on the connection wait for it.
func (x *exchange) release(pm permit) {
	if r, ok := pm.(admission.SoonReleaser); ok {
		r.ReleaseSoon()
		return
	}
	pm.Release()
}

// attempt dispatches the request to the connection of x.cur, the pick,
// holding its permit until the response (or stream) is over. Right before
// dispatch it counts the request against the connection's rate budgets;
// after the response it charges the tokens the upstream reported.
func (x *exchange) attempt() attemptResult {
	p := x.cur
	defer x.release(p.permit)
	g, t, c := x.g, p.t, p.t.c
	ks := x.key
	ks.Carry.InFlight.Add(1)
	defer ks.Carry.InFlight.Add(-1)
	if x.aff.key != 0 && c.affinity && x.aff.bound != c.id {
		c.placing.Add(1)
		defer c.placing.Add(-1)
	}
	x.relayed = 0
	defer x.kturn.GiveBack() // no dispatch followed the key's turn (cleared below when one does)
	// spent is what the attempt is known to have cost: unknown (the
	// reservation stays charged) unless nothing was dispatched or the
	// upstream answered an error status (nothing), or its usage arrived
	// with a complete answer.
	var spent ratelimit.Usage
	if !x.rt.Free() && (ks.Lim.CountsTokens() || ks.Lim.Spends() || c.lim.CountsTokens() || x.sg.budget > 0) {
		res, ok := x.reserve(c)
		defer func() { x.settleReservation(spent) }()
		if !ok {
			spent = ratelimit.Released
			p.done(health.ErrExcluded)
			return res
		}
	}
	if ks.Lim.Any() && !x.rt.Free() {
		x.countKeyDispatch()
	}
	if c.lim.Any() && !x.rt.Free() {
		switch v := x.countDispatch(c); v {
		case ratelimit.DispatchGone:
			p.done(health.ErrExcluded)
			spent = ratelimit.Released
			return attemptAnswered
		case ratelimit.DispatchSkipped:
			p.done(health.ErrExcluded)
			spent = ratelimit.Released
			return attemptSkipped
		case ratelimit.DispatchFailed, ratelimit.DispatchUnavailable:
			p.done(health.ErrExcluded)
			spent = ratelimit.Released
			x.fail(x.errBudgetStore(ratelimit.Block{Err: x.budgetErr}, v, c))
			return attemptAnswered
		}
	}
	x.kturn = ratelimit.Turn{} // dispatched: the key's turn is used
	addUsage := x.wantsUsage(t)
	payload := x.payload(t.model, addUsage)

	ctx, cancel := context.WithTimeoutCause(x.r.Context(), c.execBound, errExecTimeout)
	defer cancel()
	// The connection's URL for the route (a gemini connection's for the
	// model), shared (a RoundTripper does not modify its request). The
	// client's query string is not forwarded (DESIGN: only Gemini's alt is,
	// on its routes): what reaches the upstream is what the gateway decided,
	// after the configured URL's own query.
	u := &c.urls[x.rt]
	if t.urls != nil {
		u = &t.urls[x.rt]
	}
	if q := wire.UpstreamQuery(x.st, x.r.URL.RawQuery); q != "" {
		uq := *u
		if uq.RawQuery != "" {
			q = uq.RawQuery + "&" + q
		}
		uq.RawQuery = q
		u = &uq
	}
	ft, fast := g.transport.(*outbound.FastTransport)
	var hdr http.Header
	if fast {
		hdr = outbound.GetHeader()
	} else {
		hdr = make(http.Header, len(x.r.Header)+1)
	}
	outbound.CopyRequestHeader(hdr, x.r.Header)
	// Accept-Encoding is never forwarded (forwardRequestHeader), so usage
	// read from the body as it passes arrives uncompressed.
	hdr[c.authHeader] = c.authValue
	var span trace.Span
	if g.tracer != nil {
		ctx, span = x.startAttempt(ctx, t, u, hdr)
		defer span.End()
	}
	// out stays on this frame with FastTransport (Do takes the
	// context apart); net/http's gets a copy with the context.
	out := &http.Request{
		Method:        x.r.Method,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		ContentLength: int64(len(payload)),
		Host:          u.Host,
	}
	if fast {
		// FastTransport sends the bytes as they are and can send them again
		// (RawBody); it is done with them when Do returns, so the
		// exchange's one RawBody serves every attempt.
		x.send.Reset(payload)
		out.Body = &x.send
	} else {
		// A NopCloser over a *bytes.Reader is a body the Transport knows to
		// be in memory: it writes headers and body with one syscall.
		out.Body = io.NopCloser(bytes.NewReader(payload))
		out.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(payload)), nil
		}
	}

	t0 := time.Now()
	x.attempts++
	x.logT = t
	lp, sp := t.learn, t.shadow
	if x.rt.Free() || x.probe {
		lp, sp = nil, nil // takes no slot: not a sample of the gates' load
	}
	full := lp.Enter()
	if ci, ok := p.permit.(admission.ClusterInFlight); ok && len(lp) > 0 {
		full = lp.FullAcross(ci, full)
	}
	defer lp.Leave(t0)
	sp.Enter()
	defer sp.Leave()
	var resp *http.Response
	var err error
	if fast {
		resp, err = ft.Do(ctx, out)
	} else {
		resp, err = g.transport.RoundTrip(out.WithContext(ctx))
	}
	if fast {
		// FastTransport copied the headers before it sent anything, and its
		// response does not point back at out: the map serves the next
		// request.
		outbound.PutHeader(hdr)
	}
	if span != nil {
		tracing.Answered(x.r.Context(), span, spanAttempt(t), resp, err)
	}
	if err != nil {
		x.observeUpstream(c, t0)
		t.stats.Count(0)
		switch {
		case shuttingDown(x.r.Context()):
			// Cut by the shutdown bound before the upstream answered.
			p.done(health.ErrExcluded)
			x.noteAttempt(t, t0, 0, CodeShuttingDown)
			x.setQueueHeader(c)
			x.status, x.failed = errShuttingDown.Status, errShuttingDown
			wire.WriteError(x.w, x.st, errShuttingDown)
			return attemptAnswered
		case x.r.Context().Err() != nil:
			p.done(health.ErrExcluded)
			x.noteAttempt(t, t0, 0, CodeClientGone)
			return attemptAnswered
		case errors.Is(context.Cause(ctx), errExecTimeout):
			p.done(err)
			x.noteAttempt(t, t0, 0, CodeExecutionTimeout)
			x.upstreamFailure(c, "execution bound reached before the upstream answered")
			x.setQueueHeader(c)
			x.status, x.failed = http.StatusGatewayTimeout, &apiError{Status: http.StatusGatewayTimeout, Code: CodeExecutionTimeout,
				Message: "the upstream did not answer within the execution bound of " + c.execBound.String()}
			wire.WriteError(x.w, x.st, x.failed)
			return attemptAnswered
		}
		x.lastErr = &apiError{Status: http.StatusBadGateway, Code: CodeUpstreamError, Message: "the upstream connection failed"}
		x.noteAttempt(t, t0, 0, CodeUpstreamError)
		if outbound.IsDenied(err) {
			// GATEHOUSE_UPSTREAM_DENY refused the address at dial time:
			// not an upstream failure (no breaker), never reached.
			p.done(health.ErrExcluded)
			x.lastErr = errUpstreamDenied
			return attemptFailed
		}
		var ue *outbound.UnansweredError
		if errors.As(err, &ue) && !ue.Sent {
			spent = ratelimit.Released // never reached the upstream whole
		}
		if ue != nil && ue.Stale {
			// A stale pooled connection tells nothing of the upstream.
			p.done(health.ErrExcluded)
		} else {
			p.done(err)
			x.upstreamFailure(c, "upstream connection error")
		}
		if ue != nil && ue.Sent && x.r.Header.Get("Idempotency-Key") == "" {
			// The upstream may have read and run it: never send it again,
			// to this connection or another.
			x.setQueueHeader(c)
			x.status = http.StatusBadGateway
			wire.WriteError(x.w, x.st, x.lastErr)
			return attemptAnswered
		}
		return attemptFailed
	}
	status := resp.StatusCode
	t.stats.Count(status)
	if status >= 300 {
		spent = ratelimit.Released // the upstream did not serve it
	}
	x.noteRateLimitHeaders(c, resp.Header)
	switch {
	case status == http.StatusTooManyRequests:
		x.keepLast(c, resp, t0)
		x.noteAttempt(t, t0, status, CodeUpstreamCooldown)
		// count_tokens neither cools (Anthropic limits it apart from
		// messages) nor, below, heals a model.
		if !x.rt.Free() && !x.learnRejected(lp, status, resp.Header) {
			ra := health.ParseRetryAfter(resp.Header.Get("Retry-After"), g.now())
			now := g.now()
			x.coolDown(c, t.model, now, ra, "upstream 429 for "+t.model)
		}
		p.done(health.ErrExcluded)
		return attemptFailed
	case status == http.StatusUnauthorized:
		x.keepLast(c, resp, t0)
		x.noteAttempt(t, t0, status, CodeUpstreamError)
		x.learnRejected(lp, status, resp.Header)
		x.suspend(c, g.now(), x.s.eff.SuspendDuration(), "upstream 401")
		p.done(health.ErrExcluded)
		return attemptFailed
	case status == http.StatusForbidden:
		// An endpoint or model the account lacks: that one cools, the
		// connection stays for everyone else.
		x.keepLast(c, resp, t0)
		x.noteAttempt(t, t0, status, CodeUpstreamError)
		x.learnRejected(lp, status, resp.Header)
		x.forbidden(c, t.model, g.now())
		p.done(health.ErrExcluded)
		return attemptFailed
	case status == http.StatusRequestTimeout || status >= 500:
		x.keepLast(c, resp, t0)
		x.noteAttempt(t, t0, status, CodeUpstreamError)
		x.learnRejected(lp, status, resp.Header)
		if !x.probe {
			c.health.Failure("upstream " + strconv.Itoa(status))
		}
		p.done(upstreamStatusError(status))
		if !x.probe {
			g.alertBreaker(c)
		}
		return attemptFailed
	}
	p.done(nil)
	if status < 300 && !x.rt.Free() && !x.probe {
		c.health.Succeeded(t.model)
		lp.Succeeded(x.r.Context(), full)
		x.bindTo(c)
	}
	// Every successful answer is watched for usage: the client key's token
	// metrics count it, whatever the connection's limits.
	var tap *usage.Tap
	if status < 300 {
		sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		if x.st == wire.Gemini {
			tap = usage.NewGeminiTap(sse)
		} else {
			tap = usage.NewTap(sse, addUsage)
		}
	}
	x.status = status
	complete := x.relay(ctx, c, resp, tap)
	x.observeUpstream(c, t0)
	if x.failed != nil {
		x.noteAttempt(t, t0, status, x.failed.Code)
	} else {
		x.noteAttempt(t, t0, status, "")
	}
	if tap != nil {
		u := tap.Counts()
		x.tokensIn, x.tokensOut, x.tokensCached, x.tokensCacheWrite = u.Input, u.Output, u.CacheRead, u.CacheWrite
		x.costMicros = int64(t.rate.Cost(u.Input, u.CacheRead, u.CacheWrite, u.Output))
		if complete && u.Found {
			spent = ratelimit.Usage{Known: true, Tokens: u.RateTokens, Cost: x.costMicros}
		}
		ks.Metrics.Spend(x.costMicros)
		ks.Metrics.Tokens(u.Input, u.Output, u.CacheRead, u.CacheWrite)
		if span != nil {
			x.attemptUsage(tap)
		}
		tap.Release()
	}
	return attemptAnswered
}

// upstreamFailure feeds a failure of c to its health (the breaker's count)
// and its alerts; a connection test's failure changes nothing.
func (x *exchange) upstreamFailure(c *conn, reason string) {
	if x.probe {
		return
	}
	c.health.Failure(reason)
	x.g.alertBreaker(c)
}

func (x *exchange) observeUpstream(c *conn, t0 time.Time) {
	d := time.Since(t0)
	x.upstream += d
	c.durObs.Observe(d.Seconds())
}

func (x *exchange) setQueueHeader(c *conn) {
	h := x.w.Header()
	h[HeaderConnection] = c.labelHdr
	h[HeaderQueueMs] = x.queueMs()
	x.setRateLimitHeaders(h)
}

// queueMs is the X-Gatehouse-Queue-Ms header value.
func (x *exchange) queueMs() []string {
	if ms := x.waited.Milliseconds(); ms > 0 {
		return []string{strconv.FormatInt(ms, 10)}
	}
	return x.g.zeroMs
}

// keepLast reads a failed attempt's response (bounded) so that it can be
// sent to the client if no other connection does better.
func (x *exchange) keepLast(c *conn, resp *http.Response, t0 time.Time) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	x.observeUpstream(c, t0)
	x.noteUpstreamError(c, body)
	x.last = &lastResponse{status: resp.StatusCode, header: resp.Header, body: body, label: c.label}
}

func (x *exchange) writeLast() {
	l := x.last
	h := x.w.Header()
	outbound.CopyResponseHeader(h, l.header)
	h.Set("Content-Length", strconv.Itoa(len(l.body)))
	h[HeaderConnection] = []string{l.label}
	h[HeaderQueueMs] = x.queueMs()
	x.setRateLimitHeaders(h)
	x.status = l.status
	x.firstByte()
	x.w.WriteHeader(l.status)
	_, _ = x.w.Write(l.body)
}
