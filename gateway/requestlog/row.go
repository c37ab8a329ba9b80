// Package requestlog defines the request log's row: what the gateway reports of
// one /v1 request when it ends, what the store writes (COPY) and reads back, and
// what the dashboard shows. One type for all three, so a column added is added
// once; the package imports nothing of Gatehouse, so every layer can use it.
package requestlog

import "time"

// Row is one gateway request, admitted or not, served or failed: who, where, what
// the client got, and how long each part took. Never prompts, answers or secrets.
//
// The gateway fills its strings with its own (names from the config, the model as
// scanned), so filling one allocates nothing. In the store empty strings are NULL
// and TTFTMs < 0 is NULL. The store's COPY writes the columns in this order
// (store/requestlog.go); keep the two in step.
type Row struct {
	// ID is set by the request log's writer (a UUIDv7 of StartedAt) and by reads;
	// the gateway leaves it empty.
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
	// Status is the status the client got; wire.StatusClientGone when the client
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
	// client key and session id (16 hex digits, package session), "" without one.
	Session string
	// Affinity says how the connection choice used the request's affinity
	// binding: hit (followed it), spilled (bound elsewhere, served here),
	// bound (no binding yet, one written now) or "" (none).
	Affinity string
	// AttemptsDetail is every upstream attempt, in order, when there was more
	// than one or one failed; nil when the first attempt served the request
	// (the row's own fields are that attempt), so a plain request allocates
	// nothing for it. UpstreamError is the last failed attempt's upstream
	// message, scrubbed (package scrub), at most 512 bytes; "" = NULL.
	AttemptsDetail []Attempt
	UpstreamError  string
}

// Attempt is one upstream attempt of a request: the connection, the status it
// answered (0: none, the connection failed), how long it took, and the Gatehouse
// code that names the failure ("" for a success or an answer relayed as it was).
type Attempt struct {
	ConnectionID   string `json:"connectionId"`
	ConnectionName string `json:"connection"`
	Status         int    `json:"status"`
	Ms             int    `json:"ms"`
	Code           string `json:"code,omitempty"`
}
