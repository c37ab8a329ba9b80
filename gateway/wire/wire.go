// Package wire owns the shapes a client reads from the gateway itself: the
// API dialects (OpenAI, Anthropic, Gemini), the error envelope of each (a
// JSON body, or an event on a stream that already started) and the
// headers the gateway adds. It never decides which error to answer: the
// request flow in package gateway does, and hands the Error here to encode.
//
// Errors on Gemini routes are google.rpc errors ({"error":{"code","message","status",
// "details":[RetryInfo, ErrorInfo]}}): status from the HTTP status (RESOURCE_EXHAUSTED
// for 429, UNAVAILABLE for 502/503, DEADLINE_EXCEEDED for 504), RetryInfo.retryDelay
// equal to Retry-After and present exactly when it is (Gemini CLI and the SDKs back off
// by it), ErrorInfo.reason Gatehouse's code with domain gatehouse and metadata.gate the
// X-Gatehouse-Gate; mid-stream errors are data: events with the same object, as Google
// sends them. Every other route speaks the OpenAI or Anthropic shape its client expects,
// so SDKs raise their typed errors and retry 429 and 503 by themselves.
package wire

import (
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// HeaderGate names the gate that held a request the gateway answered itself.
const HeaderGate = "X-Gatehouse-Gate"

// Style is an API dialect: a route's and a connection's apiStyle.
type Style uint8

const (
	OpenAI Style = iota
	Anthropic
	Gemini
	// NumStyles is how many dialects there are, for arrays by Style.
	NumStyles
)

// String is the dialect's apiStyle name.
func (s Style) String() string {
	switch s {
	case Anthropic:
		return "anthropic"
	case Gemini:
		return "gemini"
	}
	return "openai"
}

// StatusClientGone is the status of a request whose client went away
// before its answer (nginx's 499 "client closed request"): what the request
// log, the metrics and the connection test record; never sent.
const StatusClientGone = 499

// Error is a response the gateway makes itself.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter int    // whole seconds; 0 = no Retry-After header
	Gate       string // X-Gatehouse-Gate; "" = none
}

// ErrorType is the `error.type` for a status, from Anthropic's vocabulary,
// which OpenAI's SDKs accept as well (they key on status and code).
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed:
		return "invalid_request_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusRequestTimeout:
		return "timeout_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	return "api_error"
}

// AppendError appends e in the given dialect's error shape:
// OpenAI {"error":{"message","type","code"}}, Anthropic
// {"type":"error","error":{"type","message","code"}}.
func AppendError(dst []byte, st Style, e *Error) []byte {
	if st == Gemini {
		return appendGeminiError(dst, e)
	}
	if st == Anthropic {
		dst = append(dst, `{"type":"error","error":{"type":`...)
		dst = usage.AppendJSONString(dst, ErrorType(e.Status))
		dst = append(dst, `,"message":`...)
		dst = usage.AppendJSONString(dst, e.Message)
		dst = append(dst, `,"code":`...)
		dst = usage.AppendJSONString(dst, e.Code)
		return append(dst, "}}"...)
	}
	dst = append(dst, `{"error":{"message":`...)
	dst = usage.AppendJSONString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = usage.AppendJSONString(dst, ErrorType(e.Status))
	dst = append(dst, `,"code":`...)
	dst = usage.AppendJSONString(dst, e.Code)
	return append(dst, "}}"...)
}

// WriteError sends e as a complete JSON response. It must be called before
// anything else was written.
func WriteError(w http.ResponseWriter, st Style, e *Error) {
	body := AppendError(make([]byte, 0, 160+len(e.Message)), st, e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if e.Gate != "" {
		h.Set(HeaderGate, e.Gate)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// AppendSSEError appends e as a server-sent event, for a stream that has
// already started: Anthropic's `event: error`, or OpenAI's bare data line.
func AppendSSEError(dst []byte, st Style, e *Error) []byte {
	if st == Anthropic {
		dst = append(dst, "event: error\n"...)
	}
	dst = append(dst, "data: "...)
	dst = AppendError(dst, st, e)
	return append(dst, "\n\n"...)
}
