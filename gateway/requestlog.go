package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/tracing"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
	"github.com/gatehouse-dev/gatehouse/internal/scrub"
)

// RequestRecord is what the gateway reports of one /v1 request when it ends,
// admitted or not, served or failed: who, where, what the client got, and how
// long each part took. Never prompts, answers or secrets. Its strings are the
// gateway's own (names from the config, the model as scanned), so filling one
// allocates nothing; a RequestLog copies it and must not keep the pointer.
//
// Its fields are store.RequestRow's, in the same order, so that the request log
// hands it to the store by a pointer conversion instead of a field-by-field copy
// (cmd/gatehouse's requestLog; the conversion stops compiling if the two differ).
type RequestRecord struct {
	// ID is always empty here: the request log's writer gives each row its id.
	ID             string
	StartedAt      time.Time
	KeyID          string
	KeyName        string
	ConnectionID   string
	ConnectionName string
	Provider       string
	// Model is the model as the client sent it; UpstreamModel the one sent upstream.
	Model         string
	UpstreamModel string
	// Route is chat, completions, responses, messages, embeddings,
	// count_tokens, gemini (every Gemini model method), models, limits or unknown.
	Route  string
	Stream bool
	// Status is the status the client got; StatusClientGone when the client
	// went away before an answer.
	Status int
	// Code is the Gatehouse error code of an answer the gateway made itself
	// ("" for upstream answers); Gate the gate that held it back or refused it.
	Code     string
	Gate     string
	Priority string
	// Attempts counts the upstream attempts dispatched.
	Attempts int
	QueueMs  int
	// TTFTMs is the time to the first byte relayed from upstream, -1 when none was.
	TTFTMs     int
	UpstreamMs int
	TotalMs    int
	// InputTokens is every prompt token the upstream processed; CachedTokens
	// the part of it read from the prompt cache, CacheWriteTokens the part
	// written to it.
	InputTokens      int64
	OutputTokens     int64
	CachedTokens     int64
	CacheWriteTokens int64
	CostMicros       int64
	TraceID          string
	Replica          string
	// Session is the request's session as stored and shown: the hash of its
	// client key and session id (package session), "" without one.
	Session string
	// Affinity says how the connection choice used the request's affinity
	// binding: hit (followed it), spilled (bound elsewhere, served here),
	// bound (no binding yet, one written now) or "" (none).
	Affinity string
	// AttemptsDetail is every upstream attempt, in order, when there was
	// more than one or one failed (nil when the first served the request,
	// so a plain request allocates nothing for it); UpstreamError the last
	// failed attempt's upstream message, scrubbed (package scrub).
	AttemptsDetail []RequestAttempt
	UpstreamError  string
}

// RequestAttempt is one upstream attempt of a request: connection, status
// (0: no answer), duration and the Gatehouse code naming its failure. The
// same unnamed struct as store.RequestAttempt, for the pointer conversion.
type RequestAttempt = struct {
	ConnectionID   string `json:"connectionId"`
	ConnectionName string `json:"connection"`
	Status         int    `json:"status"`
	Ms             int    `json:"ms"`
	Code           string `json:"code,omitempty"`
}

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
