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
)

// ServeHTTP serves the client API under /v1: the OpenAI routes
// (chat/completions, completions, embeddings, responses), Anthropic's
// /v1/messages, and GET /v1/models.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	x, e := g.prepare(w, r)
	if e != nil {
		if e != errAnswered {
			writeError(w, x.st, e)
		}
		return
	}
	x.run()
	if overhead := time.Since(start) - x.waited - x.upstream; overhead > 0 {
		g.metrics.overhead.Observe(overhead.Seconds())
	}
}

// errAnswered is prepare's answer when it has answered the client itself.
var errAnswered = &apiError{status: http.StatusOK}

// prepare checks the request (route, method, client key, body) and returns
// the exchange for its attempts, with nil, or with the error to send (x.st
// set) or errAnswered when it has answered.
//
// It is kept out of ServeHTTP, its errors are returned (so allocated on the
// heap, only when they happen) rather than written here, and the exchange
// lives on the heap, to keep the goroutine stack of a queued request small:
// everything on it, net/http's conn.serve (1.1 KiB) included, must stay
// within the 3 KiB that a 4 KiB stack leaves above its guard, or every
// waiting request carries an 8 KiB stack.
func (g *Gateway) prepare(w http.ResponseWriter, r *http.Request) (x *exchange, _ *apiError) {
	x = &exchange{st: styleOpenAI}
	rt, ok := routeOf(r.URL.Path)
	if !ok {
		return x, &apiError{status: http.StatusNotFound, code: CodeNotFound, message: "no such route: " + r.URL.Path}
	}
	st := rt.style()
	x.st = st
	want, allow := http.MethodPost, "POST"
	listing := rt == routeModels || rt == routeModel
	if listing {
		want, allow = http.MethodGet, "GET, HEAD"
	}
	if r.Method != want && !(listing && r.Method == http.MethodHead) {
		w.Header().Set("Allow", allow)
		return x, &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed, message: "method " + r.Method + " is not allowed here; use " + want}
	}
	switch secret := clientKey(r.Header); {
	case secret == "":
		return x, &apiError{status: http.StatusUnauthorized, code: CodeMissingKey,
			message: "missing client key: send it as Authorization: Bearer <key> or x-api-key"}
	case g.auth == nil || !g.auth(secret):
		return x, &apiError{status: http.StatusUnauthorized, code: CodeInvalidKey, message: "invalid client key"}
	}
	s := g.state.Load()
	if s == nil || g.closed.Load() {
		return x, &apiError{status: http.StatusServiceUnavailable, code: CodeNotReady, retryAfter: 1,
			message: "the gateway has no configuration loaded or is shutting down"}
	}
	if listing {
		body := s.modelsBody
		if rt == routeModel {
			id := strings.TrimPrefix(r.URL.Path, modelPrefix)
			if body = s.modelBodies[id]; body == nil {
				return x, &apiError{status: http.StatusNotFound, code: CodeModelNotFound, message: "no enabled connection serves model " + strconv.Quote(id)}
			}
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
		return x, errAnswered
	}

	if err := readBody(r.Body, &x.body, r.ContentLength, g.maxBody); err != nil {
		if errors.Is(err, errBodyTooLarge) {
			return x, &apiError{status: http.StatusRequestEntityTooLarge, code: CodeBodyTooLarge,
				message: "request body exceeds " + strconv.FormatInt(g.maxBody, 10) + " bytes"}
		}
		if r.Context().Err() == nil {
			return x, &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: "could not read the request body"}
		}
		return x, errAnswered
	}
	info, err := scanBody(x.body.raw)
	if err != nil {
		return x, &apiError{status: http.StatusBadRequest, code: CodeInvalidRequest, message: describeScanError(err)}
	}
	targets := s.routes[st][info.model]
	if len(targets) == 0 {
		return x, &apiError{status: http.StatusNotFound, code: CodeModelNotFound,
			message: "model " + strconv.Quote(info.model) + " is not served by any enabled " + st.String() + "-style connection"}
	}
	if len(targets) > maxCandidates {
		targets = targets[:maxCandidates]
	}
	x.g, x.w, x.r, x.s, x.rt, x.info, x.targets = g, w, r, s, rt, info, targets
	return x, nil
}

// maxCandidates bounds the connections considered for one model.
const maxCandidates = 64

// clientKey returns the client's secret from Authorization: Bearer or x-api-key.
func clientKey(h http.Header) string {
	if v := h["Authorization"]; len(v) > 0 {
		if len(v[0]) > 7 && strings.EqualFold(v[0][:7], "bearer ") {
			return strings.TrimSpace(v[0][7:])
		}
	}
	if v := h["X-Api-Key"]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

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

// exchange is one client request on its way through the attempts.
type exchange struct {
	g       *Gateway
	w       http.ResponseWriter
	r       *http.Request
	s       *state
	rt      route
	st      style
	body    reqBody
	info    bodyInfo
	targets []*target
	tried   uint64 // bit i: targets[i] was dispatched to
	waited  time.Duration
	// upstream is the time spent on upstream attempts, for the overhead metric.
	upstream time.Duration
	last     *lastResponse
	lastErr  *apiError // the latest failure without an upstream response
}

// attemptResult is what an attempt did.
type attemptResult uint8

const (
	attemptAnswered attemptResult = iota // the client has its answer (or is gone)
	attemptFailed                        // dispatched and failed: try the next connection
	attemptSkipped                       // not dispatched, a budget ran out: try the next, no attempt spent
)

// run makes up to maxAttempts attempts and answers the client.
func (x *exchange) run() {
	for attempts, skips := 0, 0; attempts < x.s.maxAttempts && skips <= len(x.targets); {
		p, aerr := x.choose()
		if aerr == errClientGone {
			return
		}
		if p.t == nil {
			// Nothing left to try. An admission rejection or a cooldown is
			// the reason to report; when the remaining connections are merely
			// unhealthy, the last upstream failure says more.
			if aerr != nil && (aerr.code != CodeNoHealthy || (x.last == nil && x.lastErr == nil)) {
				x.fail(aerr)
				return
			}
			break
		}
		switch x.attempt(p) {
		case attemptAnswered:
			return
		case attemptFailed:
			x.tried |= 1 << p.idx
			attempts++
		case attemptSkipped:
			// The connection's budget shows as exhausted now, so choose
			// skips it; skips bounds the loop all the same.
			skips++
		}
	}
	switch {
	case x.last != nil:
		x.writeLast()
	case x.lastErr != nil:
		x.fail(x.lastErr)
	default:
		x.fail(&apiError{status: http.StatusBadGateway, code: CodeUpstreamError, message: "no upstream connection answered"})
	}
}

// fail answers the client with the gateway's own error e, with the time the
// request spent queued (X-Gatehouse-Queue-Ms) like every answer after routing.
func (x *exchange) fail(e *apiError) {
	x.w.Header()[HeaderQueueMs] = x.queueMs()
	writeError(x.w, x.st, e)
}

// wantsUsage reports whether an attempt on c must ask the upstream for
// stream usage the client did not ask for: an OpenAI chat or legacy
// completion stream to a connection with tpm or tpd. The gateway then adds
// stream_options.include_usage and strips the usage chunk from the stream.
func (x *exchange) wantsUsage(c *conn) bool {
	return (x.rt == routeChat || x.rt == routeCompletions) && x.info.stream && !x.info.includeUsage && c.lim.countsTokens()
}

// payload returns the body to send for upstream model m: the client's bytes,
// or a copy with the model value replaced and, with addUsage,
// stream_options.include_usage set.
func (x *exchange) payload(m string, addUsage bool) []byte {
	if m == x.info.model && !addUsage {
		return x.body.raw
	}
	if x.body.altM != m || x.body.altUsage != addUsage || len(x.body.alt) == 0 {
		// An earlier attempt's Transport may still be reading the old
		// copy: never write over it.
		x.body.alt = rewriteBody(nil, x.body.raw, x.info, m, addUsage)
		x.body.altM, x.body.altUsage = m, addUsage
	}
	return x.body.alt
}

// attempt dispatches the request to p's connection, holding p's permit until
// the response (or stream) is over. Right before dispatch it counts the
// request against the connection's rate budgets; after the response it
// charges the tokens the upstream reported.
func (x *exchange) attempt(p pick) attemptResult {
	defer p.permit.Release()
	g, t, c := x.g, p.t, p.t.c
	var used int64 // tokens the upstream reported
	if c.lim.any() {
		reserved, v := x.countDispatch(c)
		switch v {
		case dispatchGone:
			p.done(errBreakerExcluded)
			return attemptAnswered
		case dispatchSkipped:
			p.done(errBreakerExcluded)
			return attemptSkipped
		}
		defer func() { x.settle(c, reserved, used) }()
	}
	addUsage := x.wantsUsage(c)
	payload := x.payload(t.model, addUsage)

	ctx, cancel := context.WithTimeoutCause(x.r.Context(), c.execBound, errExecTimeout)
	defer cancel()
	u := c.urls[x.rt]
	u.RawQuery = x.r.URL.RawQuery
	hdr := make(http.Header, len(x.r.Header)+1)
	copyRequestHeader(hdr, x.r.Header)
	hdr[c.authHeader] = c.authValue
	if c.lim.countsTokens() {
		// Usage is read from the body as it passes: it must arrive
		// uncompressed.
		delete(hdr, "Accept-Encoding")
	}
	out := (&http.Request{
		Method:     x.r.Method,
		URL:        &u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     hdr,
		// A NopCloser over a *bytes.Reader is a body the Transport knows to
		// be in memory: it writes headers and body with one syscall.
		Body:          io.NopCloser(bytes.NewReader(payload)),
		ContentLength: int64(len(payload)),
		Host:          u.Host,
		GetBody: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(payload)), nil
		},
	}).WithContext(ctx)

	t0 := time.Now()
	resp, err := g.transport.RoundTrip(out)
	if err != nil {
		x.observeUpstream(c, t0)
		t.stats.count(0)
		switch {
		case x.r.Context().Err() != nil:
			p.done(errBreakerExcluded)
			return attemptAnswered
		case errors.Is(context.Cause(ctx), errExecTimeout):
			p.done(err)
			c.health.failure("execution bound reached before the upstream answered")
			x.setQueueHeader(c)
			writeError(x.w, x.st, &apiError{status: http.StatusGatewayTimeout, code: CodeExecutionTimeout,
				message: "the upstream did not answer within the execution bound of " + c.execBound.String()})
			return attemptAnswered
		}
		p.done(err)
		c.health.failure("upstream connection error")
		x.lastErr = &apiError{status: http.StatusBadGateway, code: CodeUpstreamError, message: "the upstream connection failed"}
		return attemptFailed
	}
	status := resp.StatusCode
	t.stats.count(status)
	switch {
	case status == http.StatusTooManyRequests:
		x.keepLast(c, resp, t0)
		ra := parseRetryAfter(resp.Header.Get("Retry-After"), g.now())
		now := g.now()
		until := c.health.coolDown(t.model, now, ra, "upstream 429 for "+t.model)
		if g.shared != nil {
			x.sharedCoolDown(c, t.model, now, until)
		}
		p.done(errBreakerExcluded)
		return attemptFailed
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		x.keepLast(c, resp, t0)
		c.health.suspend(g.now(), x.s.eff.SuspendDuration(), "upstream "+strconv.Itoa(status))
		if g.shared != nil {
			x.sharedSuspend(c, x.s.eff.SuspendDuration())
		}
		p.done(errBreakerExcluded)
		return attemptFailed
	case status == http.StatusRequestTimeout || status >= 500:
		x.keepLast(c, resp, t0)
		c.health.failure("upstream " + strconv.Itoa(status))
		p.done(upstreamStatusError(status))
		return attemptFailed
	}
	p.done(nil)
	if status < 300 {
		c.health.succeeded(t.model)
	}
	var tap *usageTap
	if c.lim.countsTokens() && status < 300 {
		sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		tap = newUsageTap(sse, addUsage)
	}
	x.relay(ctx, c, resp, tap)
	x.observeUpstream(c, t0)
	if tap != nil {
		used = tap.tokens()
	}
	return attemptAnswered
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
	x.last = &lastResponse{status: resp.StatusCode, header: resp.Header, body: body, label: c.label}
}

func (x *exchange) writeLast() {
	l := x.last
	h := x.w.Header()
	copyResponseHeader(h, l.header)
	h.Set("Content-Length", strconv.Itoa(len(l.body)))
	h[HeaderConnection] = []string{l.label}
	h[HeaderQueueMs] = x.queueMs()
	x.w.WriteHeader(l.status)
	_, _ = x.w.Write(l.body)
}

// relay sends resp to the client as it arrives, flushing after every write
// for server-sent events. Of an event stream it sends complete events (and
// keep-alive comments) and holds back the start of an event still under way,
// so that the error event it may add never lands inside another event. It
// ends when the body ends, the client goes away or the execution bound
// fires; a stream that breaks after it started gets an SSE error event, any
// other body is aborted so the client sees it cut.
//
// A non-nil tap watches the body for token usage on the way (and, when it
// strips, decides which stream events the client gets).
func (x *exchange) relay(ctx context.Context, c *conn, resp *http.Response, tap *usageTap) {
	defer resp.Body.Close()
	h := x.w.Header()
	copyResponseHeader(h, resp.Header)
	x.setQueueHeader(c)
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	x.w.WriteHeader(resp.StatusCode)
	var rc *http.ResponseController
	if sse {
		rc = http.NewResponseController(x.w)
		if rc.Flush() != nil {
			return
		}
	}
	bufp := x.g.getCopyBuf()
	defer x.g.copyBuf.Put(bufp)
	buf := *bufp
	// held is the start of an SSE event whose end has not arrived yet: it
	// is sent with the rest of its event, so that an error event never
	// lands in the middle of one.
	var held []byte
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			out := buf[:n]
			if tap != nil {
				out = tap.feed(out)
			}
			if sse {
				if len(held) > 0 {
					held = append(held, out...)
					out = held
				}
				end := sendableEnd(out)
				if end == 0 && len(out) > maxHeldEvent {
					end = len(out) // no event boundary in sight: stop holding back
				}
				if end > 0 {
					if _, werr := x.w.Write(out[:end]); werr != nil || rc.Flush() != nil {
						return
					}
				}
				if len(held) > 0 {
					held = held[:copy(held, held[end:])]
				} else {
					held = append(held, out[end:]...)
				}
			} else if len(out) > 0 {
				if _, werr := x.w.Write(out); werr != nil {
					return
				}
			}
		}
		if rerr == nil {
			continue
		}
		if rerr == io.EOF {
			rest := tap.flushed()
			if len(held) > 0 {
				// The upstream ended without finishing its last event:
				// pass its bytes on as they are.
				rest = append(held, rest...)
			}
			if len(rest) > 0 {
				if _, werr := x.w.Write(rest); werr == nil && sse {
					_ = rc.Flush()
				}
			}
			return
		}
		if x.r.Context().Err() != nil {
			return
		}
		e := &apiError{status: http.StatusBadGateway, code: CodeUpstreamStreamErr, message: "the upstream stream broke off"}
		if errors.Is(context.Cause(ctx), errExecTimeout) {
			e = &apiError{status: http.StatusGatewayTimeout, code: CodeExecutionTimeout,
				message: "the execution bound of " + c.execBound.String() + " was reached"}
		}
		if !sse {
			panic(http.ErrAbortHandler)
		}
		ev := appendSSEError(buf[:0], x.st, e)
		if _, err := x.w.Write(ev); err == nil {
			_ = rc.Flush()
		}
		return
	}
}

// Hop-by-hop and client-credential headers are never forwarded upstream.
func skipRequestHeader(k string) bool {
	switch k {
	case "Authorization", "X-Api-Key", "Cookie", "Host", "Content-Length",
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
		"Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

func skipResponseHeader(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Set-Cookie":
		return true
	}
	return false
}

// copyRequestHeader copies src into dst without hop-by-hop headers (those
// named in Connection too) and without the client's credentials. Value
// slices are shared: neither side is modified afterwards.
func copyRequestHeader(dst, src http.Header) {
	for k, vv := range src {
		if !skipRequestHeader(k) {
			dst[k] = vv
		}
	}
	for _, v := range src["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			delete(dst, http.CanonicalHeaderKey(strings.TrimSpace(name)))
		}
	}
}

func copyResponseHeader(dst, src http.Header) {
	for k, vv := range src {
		if !skipResponseHeader(k) {
			dst[k] = vv
		}
	}
	for _, v := range src["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			delete(dst, http.CanonicalHeaderKey(strings.TrimSpace(name)))
		}
	}
}

// maxHeldEvent bounds how much of an unfinished SSE event relay holds back;
// past it, bytes are passed on as they come.
const maxHeldEvent = 1 << 20

// sendableEnd returns how much of b, which starts at an SSE event boundary,
// can be sent now: every complete event, and after them any complete
// comment lines (keep-alives) and blank lines, which change no event state.
// What is left is the start of an event still under way.
func sendableEnd(b []byte) int {
	end := eventsEnd(b)
	for end < len(b) {
		switch b[end] {
		case '\n', '\r':
			end++
			continue
		case ':':
			i := bytes.IndexAny(b[end:], "\r\n")
			if i < 0 {
				return end
			}
			end += i + 1
			continue
		}
		return end
	}
	return end
}

// eventsEnd returns the length of the longest prefix of b that ends with a
// complete SSE event, 0 if none does: the end of a blank line, that is a
// line terminator (CRLF, LF or CR) right after another one. b starts at an
// event boundary.
func eventsEnd(b []byte) int {
	for j := len(b) - 1; j >= 1; j-- {
		switch b[j] {
		case '\n':
			switch {
			case b[j-1] == '\n': // LF LF
				return j + 1
			case b[j-1] == '\r' && j >= 2 && (b[j-2] == '\n' || b[j-2] == '\r'): // (CR)LF CRLF, CR CRLF
				return j + 1
			}
		case '\r':
			if b[j-1] == '\r' || b[j-1] == '\n' { // CR CR, LF CR (a following LF would only complete the CRLF)
				return j + 1
			}
		}
	}
	return 0
}
