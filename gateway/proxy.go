package gateway

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/inbound"
	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// ServeHTTP serves the client API under /v1: the OpenAI routes
// (chat/completions, completions, embeddings, responses), Anthropic's
// /v1/messages, and GET /v1/models.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Three calls side by side, so that only this small frame sits under a
	// queued request's wait (see queue).
	if x := g.begin(w, r); x != nil {
		defer x.body.Release(g.bodyBytes) // a relay that aborts panics
		defer x.leaveSession()
		x.run()
		x.end()
	}
}

// begin starts serving r: the server span, prepare, and the answer to a
// request prepare refused or answered itself. It returns the exchange to
// run, or nil when r has its answer.
func (g *Gateway) begin(w http.ResponseWriter, r *http.Request) *exchange {
	start := time.Now()
	var ss *tracing.Server
	if g.tracer != nil {
		w, r, ss = g.startServerSpan(w, r)
	}
	x, e := g.prepare(w, r)
	if e != nil {
		x.body.Release(g.bodyBytes)
	}
	x.start, x.span = start, ss
	if ss != nil {
		x.spanPrepared()
	}
	if e == nil {
		return x
	}
	if e != errAnswered {
		h := w.Header()
		h[HeaderQueueMs] = g.zeroMs
		x.setRateLimitHeaders(h)
		wire.WriteError(w, x.st, e)
		x.status, x.failed = e.Status, e
	} else if x.status == 0 {
		x.status = http.StatusOK
	}
	x.countClient()
	if ss != nil {
		ss.End(x.waited)
	}
	x.record(r)
	return nil
}

// end closes an exchange that ran: the client metrics, the overhead metric,
// the server span and the request log.
func (x *exchange) end() {
	x.countClient()
	if x.aff.key != 0 && !x.rt.Free() {
		x.g.metrics.Affinity[x.aff.result.metricIndex()].Inc()
	}
	if overhead := time.Since(x.start) - x.waited - x.upstream; overhead > 0 {
		x.g.metrics.Overhead.Observe(overhead.Seconds())
	}
	if x.span != nil {
		x.span.End(x.waited)
	}
	x.record(x.r)
}

// errShuttingDown answers a request queued, or arriving, after Drain, and
// one cut by ErrShuttingDown before its answer started.
var errShuttingDown = &apiError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, RetryAfter: 1,
	Message: "Gatehouse is shutting down; retry on another replica"}

// shuttingDown reports whether ctx was cancelled with cause ErrShuttingDown.
func shuttingDown(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShuttingDown)
}

// errAnswered is prepare's answer when it has answered the client itself.
var errAnswered = &apiError{Status: http.StatusOK}

// prepare checks the request (route, method, client key, body) and returns
// the exchange for its attempts, with nil, or with the error to send (x.st
// set) or errAnswered when it has answered.
//
// It is kept out of ServeHTTP, its errors are returned (so allocated on the
// heap, only when they happen) rather than written here, its steps run in
// frames of their own (side by side, not nested), and the exchange lives on
// the heap, to keep the goroutine stack of a queued request small:
// everything a request does before it queues, net/http's conn.serve
// (1.1 KiB) included, must stay within the 3 KiB that a 4 KiB stack leaves
// above its guard, or every waiting request carries an 8 KiB stack (a stack
// never shrinks while conn.serve's frame is on it).
func (g *Gateway) prepare(w http.ResponseWriter, r *http.Request) (x *exchange, _ *apiError) {
	x = &exchange{g: g, st: wire.OpenAI}
	rt, aerr := x.checkRoute(w, r)
	if aerr != nil {
		return x, aerr
	}
	s, ks, aerr := g.authenticate(x, r)
	if aerr != nil {
		return x, aerr
	}
	if rt == route.Limits {
		return x, x.answerLimits(w, r, ks)
	}
	if rt.Listing() {
		w.Header()[HeaderQueueMs] = g.zeroMs
		if rt.Style() == wire.Gemini {
			return x, listGeminiModels(w, r, s, ks, rt)
		}
		return x, listModels(w, r, s, ks, rt)
	}
	if aerr := x.checkPriority(r, ks); aerr != nil {
		return x, aerr
	}
	if aerr := x.readBody(w, r); aerr != nil {
		return x, aerr
	}
	if aerr := x.route(s, r.URL.Path, rt); aerr != nil {
		return x, aerr
	}
	x.g, x.w, x.r, x.s, x.rt, x.key = g, w, r, s, rt, ks
	x.sessionOf(r)
	return x, nil
}

// checkRoute finds the route of r and checks its method; x.st is the
// route's style from then on.
func (x *exchange) checkRoute(w http.ResponseWriter, r *http.Request) (route.Route, *apiError) {
	rt, ok := route.Of(r.URL.Path)
	if !ok {
		x.rt = route.Unknown
		if strings.HasPrefix(r.URL.Path, route.GeminiBeta) {
			x.st = wire.Gemini
		}
		return rt, &apiError{Status: http.StatusNotFound, Code: CodeNotFound, Message: "no such route: " + r.URL.Path}
	}
	x.st, x.rt = rt.Style(), rt
	want, allow := http.MethodPost, "POST"
	listing := rt.Listing() || rt == route.Limits
	if listing {
		want, allow = http.MethodGet, "GET, HEAD"
	}
	if r.Method != want && !(listing && r.Method == http.MethodHead) {
		w.Header().Set("Allow", allow)
		return rt, &apiError{Status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: "method " + r.Method + " is not allowed here; use " + want}
	}
	return rt, nil
}

// readBody reads r's body into x.body, or returns the error to send
// (errAnswered when the client has gone).
func (x *exchange) readBody(w http.ResponseWriter, r *http.Request) *apiError {
	err := inbound.Read(r.Body, &x.body.Body, r.ContentLength, x.g.maxBody, x.g.bodyBytes)
	if err == nil {
		return nil
	}
	if err == inbound.ErrBudget {
		return errOverloaded
	}
	if errors.Is(err, inbound.ErrTooLarge) {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge,
			Message: "request body exceeds " + strconv.FormatInt(x.g.maxBody, 10) + " bytes"}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The server's body read bound (a read deadline) ran out; the
		// connection is closed after this answer (a half-read body
		// cannot be skipped).
		w.Header().Set("Connection", "close")
		return errBodyTimeout
	}
	if r.Context().Err() == nil {
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "could not read the request body"}
	}
	return errAnswered
}

// errBodyTimeout answers a body that did not arrive within the server's
// read bound.
var errBodyTimeout = &apiError{Status: http.StatusRequestTimeout, Code: CodeRequestTimeout,
	Message: "the request body did not arrive in time"}

// route reads the request's model — the body's, or a Gemini path's — and
// sets x.info and x.targets, the connections of style x.st serving it (or
// the model its alias names) that the key may use, or returns the error to
// send.
func (x *exchange) route(s *state, path string, rt route.Route) *apiError {
	var info usage.Request
	if x.st == wire.Gemini {
		// The model is the path's; the body is the upstream's to check.
		info.Model, info.Stream = route.PathModel(path), rt == route.StreamGenerate
		info.MaxOutput = usage.GeminiMaxOutput(x.body.Raw)
		info.Choices = usage.GeminiCandidates(x.body.Raw)
		if info.Model == "" {
			return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "the path names no model"}
		}
	} else {
		var err error
		if info, err = usage.Scan(x.body.Raw); err != nil {
			return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: usage.Describe(err)}
		}
	}
	// The request log keeps the model the client asked for, refused or not.
	x.info.Model, x.info.Stream = info.Model, info.Stream
	st := x.st
	name := info.Model
	if to, ok := s.eff.Aliases[name]; ok {
		name = to
	}
	targets := s.routes[st][name]
	if len(targets) == 0 {
		return &apiError{Status: http.StatusNotFound, Code: CodeModelNotFound,
			Message: "model " + quoteModel(info.Model) + " is not served by any enabled " + st.String() + "-style connection"}
	}
	if targets = allowedTargets(x.key, targets); len(targets) == 0 {
		return &apiError{Status: http.StatusForbidden, Code: CodeModelNotAllowed,
			Message: "client key " + strconv.Quote(x.keyName) + " may not use model " + quoteModel(info.Model)}
	}
	if len(targets) > maxCandidates {
		targets = targets[:maxCandidates]
	}
	x.info, x.targets = info, targets
	return nil
}

// maxCandidates bounds the connections considered for one model.
const maxCandidates = 64

// exchange is one client request on its way through the attempts.
type exchange struct {
	g    *Gateway
	w    http.ResponseWriter
	r    *http.Request
	s    *state
	rt   route.Route
	st   wire.Style
	body reqBody
	// send is the body of the attempt in flight on FastTransport (attempt):
	// part of the exchange, so that sending it allocates nothing.
	send    outbound.RawBody
	info    usage.Request
	targets []*target
	tried   uint64 // bit i: targets[i] was dispatched to
	waited  time.Duration
	holds   // budgets and turns held for the attempt to come (reserve.go)
	// upstream is the time spent on upstream attempts, for the overhead metric.
	upstream time.Duration
	last     *lastResponse
	lastErr  *apiError // the latest failure without an upstream response
	// slot is the permit of the exchange's first admission through the
	// in-process controller (admit.go): part of the exchange, which is
	// allocated anyway, so admission allocates nothing.
	slot     admission.Permit
	slotUsed bool
	// key is the client key the request authenticated with (nil before);
	// keyName its name, set as soon as it is known.
	key *clientkey.State
	// priority is the request's class: its key's, lowered by X-Gatehouse-Priority.
	priority admission.Priority
	keyName  string
	// path holds the gate path of a key with a cap (request); pathBuf is
	// its storage, so building it allocates nothing.
	path    []admission.GateRef
	pathBuf [1 + 4]admission.GateRef
	// status is the HTTP status answered, for the client metrics.
	status int
	// cur is the pick of the current attempt, set by the choice (zero when
	// nothing can be tried); kept here, not on run's frame, which is under
	// a queued request's wait.
	cur pick
	// start is when ServeHTTP began, for the overhead metric; span is the
	// server span (nil without tracing).
	start time.Time
	span  *tracing.Server

	// cand is the candidates of the current choice (choose); the q fields
	// are the state of a queue wait (queue, awaited), kept here
	// rather than on the stack of the waiting goroutine.
	cand      candidates
	qReq      admission.Request
	qStart    time.Time
	qPermit   permit
	qErr      error
	qFull     *admission.Error
	qRechoose bool

	// The request log's facts (requestlog.go): the gateway's own error
	// answered (nil for upstream answers), attempts dispatched, the target of
	// the latest, when the first byte was relayed (since start), the tokens
	// the upstream reported and their cost; rec is the record handed over.
	failed              *apiError
	attempts            int
	logT                *target
	ttft                time.Duration
	tokensIn, tokensOut int64
	// tokensCached and tokensCacheWrite are the parts of tokensIn read from
	// and written to the prompt cache (usage.Counts).
	tokensCached, tokensCacheWrite int64
	costMicros                     int64
	rec                            RequestRecord
	// atts is every attempt when one failed (noteAttempt), upErr the last
	// upstream failure's message (noteUpstreamError).
	atts  []RequestAttempt
	upErr string
	// probe marks a connection test (Probe): it passes the connection's
	// health checks and leaves its health as it found it.
	probe bool

	// aff is the request's session and affinity (affinity.go).
	aff affinity
	// sg is what the request holds at its session's guard (sessionguard.go).
	sg sessionHold
}

// run makes up to maxAttempts attempts and answers the client. Its frame is
// under a queued request's wait (see queue): kept small.
func (x *exchange) run() {
	if aerr := x.keyBlocked(); aerr != nil && !x.rt.Free() {
		x.fail(aerr)
		return
	}
	if aerr := x.enterSession(); aerr != nil {
		if aerr != errClientGone {
			x.fail(aerr)
		}
		return
	}
	if x.rt.Free() {
		if aerr := x.freeKeyTurn(); aerr != nil {
			if aerr != errClientGone {
				x.fail(aerr)
			}
			return
		}
		defer x.kturn.GiveBack() // nothing dispatched (attempt clears it when one is)
	}
	for attempts, skips := 0, 0; attempts < x.s.maxAttempts && skips <= len(x.targets); {
		if aerr := x.keyTurnFirst(); aerr != nil {
			if aerr != errClientGone {
				x.fail(aerr)
			}
			return
		}
		var aerr *apiError
		switch {
		case x.rt.Free():
			aerr = x.chooseFree()
		case x.g.tracer != nil:
			aerr = x.chooseTraced()
		default:
			aerr = x.choose()
		}
		if aerr == errClientGone {
			x.kturn.GiveBack()
			return
		}
		if x.cur.t == nil {
			x.kturn.GiveBack() // no dispatch follows the key's turn
			// Nothing left to try. An admission rejection or a cooldown is
			// the reason to report; when the remaining connections are merely
			// unhealthy, the last upstream failure says more.
			if aerr != nil && (aerr.Code != CodeNoHealthy || (x.last == nil && x.lastErr == nil)) {
				x.fail(aerr)
				return
			}
			break
		}
		switch x.attempt() {
		case attemptAnswered:
			return
		case attemptFailed:
			x.tried |= 1 << x.cur.idx
			attempts++
		case attemptSkipped:
			// Out of the connection's budget: not tried again, no attempt spent.
			x.tried |= 1 << x.cur.idx
			skips++
		}
	}
	x.answerFailed()
}

// answerFailed answers a request that no attempt answered.
func (x *exchange) answerFailed() {
	switch {
	case x.last != nil:
		x.writeLast()
	case x.lastErr != nil:
		x.fail(x.lastErr)
	case x.skipBlk.Code != "":
		x.fail(x.rateError(x.skipBlk, x.skipBlk.Until.Sub(x.g.now())))
	default:
		x.fail(&apiError{Status: http.StatusBadGateway, Code: CodeUpstreamError, Message: "no upstream connection answered"})
	}
}

// fail answers the client with the gateway's own error e, with the time the
// request spent queued (X-Gatehouse-Queue-Ms) like every answer after routing.
func (x *exchange) fail(e *apiError) {
	x.status, x.failed = e.Status, e
	h := x.w.Header()
	h[HeaderQueueMs] = x.queueMs()
	x.setRateLimitHeaders(h)
	wire.WriteError(x.w, x.st, e)
}
