package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/requestlog"
	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
	"github.com/gatehouse-dev/gatehouse/internal/scrub"
)

// RequestRecord is what the gateway reports of one /v1 request when it ends: the
// request log's row (package requestlog), which the store writes as it is. A
// RequestLog copies it and must not keep the pointer.
type RequestRecord = requestlog.Row

// RequestAttempt is one upstream attempt of a request (package requestlog).
type RequestAttempt = requestlog.Attempt

// CodeClientGone is the request log's code of a request whose client went
// away before its answer (status StatusClientGone).
const CodeClientGone = "CLIENT_GONE"

// StatusClientGone is a record's Status when the client went away before its
// answer (wire.StatusClientGone).
const StatusClientGone = wire.StatusClientGone

// RequestLog receives a record at the end of every /v1 request. Record is
// called on the request's goroutine: it must not block (buffer, or drop and
// count) and must not keep r.
type RequestLog interface {
	Record(r *RequestRecord)
}

// noRequestLog is the RequestLog of a gateway without one.
type noRequestLog struct{}

func (noRequestLog) Record(*RequestRecord) {}

// record reports x, serving r, to the request log. It reuses x.rec: the exchange is on
// the heap already, so the record costs no allocation of its own.
func (x *exchange) record(r *http.Request) {
	rec := &x.rec
	*rec = RequestRecord{
		StartedAt: x.start, KeyName: x.keyName, Route: x.rt.LogName(), Stream: x.info.Stream,
		Model: x.info.Model, Status: x.status, Attempts: x.attempts, QueueMs: int(x.waited.Milliseconds()),
		TTFTMs: -1, UpstreamMs: int(x.upstream.Milliseconds()), TotalMs: int(time.Since(x.start).Milliseconds()),
		InputTokens: x.tokensIn, OutputTokens: x.tokensOut, CachedTokens: x.tokensCached, CacheWriteTokens: x.tokensCacheWrite,
		CostMicros: x.costMicros,
		Replica:    x.g.replica, Session: x.aff.session, Affinity: x.aff.result.String(),
		AttemptsDetail: x.atts, UpstreamError: x.upErr,
	}
	if rec.Status == 0 {
		rec.Status = StatusClientGone
	}
	if x.key != nil {
		rec.KeyID, rec.Priority = x.key.ID, x.priority.String()
	}
	if t := x.logT; t != nil {
		rec.ConnectionID, rec.ConnectionName, rec.Provider, rec.UpstreamModel = t.c.id, t.c.name, t.c.provider, t.model
	}
	switch e := x.failed; {
	case e != nil:
		rec.Code, rec.Gate = e.Code, e.Gate
	case rec.Status == StatusClientGone:
		rec.Code = CodeClientGone
	case len(x.atts) > 0 && x.atts[len(x.atts)-1].Code != "" && x.atts[len(x.atts)-1].Status == rec.Status:
		// An upstream's failure answered as it was (writeLast): named by
		// its attempt's code.
		rec.Code = x.atts[len(x.atts)-1].Code
	}
	if x.ttft > 0 {
		rec.TTFTMs = int(x.ttft.Milliseconds())
	}
	if x.span != nil {
		rec.TraceID = x.span.TraceID()
	} else {
		rec.TraceID = tracing.IncomingTraceID(r.Header)
	}
	x.g.reqlog.Record(rec)
}

// noteAttempt adds the attempt on t, begun at t0, that ended with status
// (0: no answer) and code to the attempts kept for the request log. A
// request served by its first attempt keeps none: the row is that attempt.
func (x *exchange) noteAttempt(t *target, t0 time.Time, status int, code string) {
	if code == "" && len(x.atts) == 0 {
		return
	}
	x.atts = append(x.atts, RequestAttempt{ConnectionID: t.c.id, ConnectionName: t.c.name,
		Status: status, Ms: int(time.Since(t0).Milliseconds()), Code: code})
}

// noteUpstreamError keeps body, an upstream's failed answer on c, as the
// request's upstream message: its first bytes, without the credential sent
// or any echo of the request body (package scrub).
func (x *exchange) noteUpstreamError(c *conn, body []byte) {
	if len(body) == 0 {
		return
	}
	var cred string
	if len(c.authValue) > 0 {
		cred = c.authValue[0]
	}
	x.upErr = scrub.Message(body, x.body.Raw, cred, strings.TrimPrefix(cred, "Bearer "))
}

// firstByte notes when the first byte of an upstream answer went to the client.
func (x *exchange) firstByte() {
	if x.ttft == 0 {
		x.ttft = max(time.Since(x.start), time.Nanosecond)
	}
}
