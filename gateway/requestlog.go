package gateway

import (
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/requestlog"
	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// RequestRecord is what the gateway reports of one /v1 request when it ends: the
// request log's row (package requestlog), which the store writes as it is. A
// RequestLog copies it and must not keep the pointer.
type RequestRecord = requestlog.Row

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
	if e := x.failed; e != nil {
		rec.Code, rec.Gate = e.Code, e.Gate
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

// firstByte notes when the first byte of an upstream answer went to the client.
func (x *exchange) firstByte() {
	if x.ttft == 0 {
		x.ttft = max(time.Since(x.start), time.Nanosecond)
	}
}
