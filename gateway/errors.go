package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// Error codes the gateway itself answers with, in `error.code`. The
// admission codes SEMAPHORE_TIMEOUT and SEMAPHORE_QUEUE_FULL come from
// package admission.
const (
	CodeMissingKey        = "MISSING_API_KEY"
	CodeInvalidKey        = "INVALID_API_KEY"
	CodeInvalidRequest    = "INVALID_REQUEST"
	CodeBodyTooLarge      = "REQUEST_TOO_LARGE"
	CodeModelNotFound     = "MODEL_NOT_FOUND"
	CodeNotFound          = "NOT_FOUND"
	CodeMethodNotAllowed  = "METHOD_NOT_ALLOWED"
	CodeNotReady          = "GATEWAY_NOT_READY"
	CodeUpstreamCooldown  = "UPSTREAM_COOLDOWN"
	CodeNoHealthy         = "NO_HEALTHY_CONNECTION"
	CodeExecutionTimeout  = "RATE_LIMIT_EXECUTION_TIMEOUT"
	CodeUpstreamError     = "UPSTREAM_UNAVAILABLE"
	CodeUpstreamStreamErr = "UPSTREAM_STREAM_ERROR"
	// CodeClusterUnavailable (503) means cluster mode runs fail-closed and
	// its shared admission store (Redis) cannot be reached.
	CodeClusterUnavailable = admission.CodeUnavailable
	// CodeShuttingDown (503, Retry-After 1) answers a request that was
	// queued, or arrived, after Drain, and one cut when the shutdown bound
	// ran out.
	CodeShuttingDown = admission.CodeShuttingDown
	// CodeRequestTimeout (408) answers a request whose body did not arrive
	// within the server's body read bound.
	CodeRequestTimeout = "REQUEST_TIMEOUT"
	// CodeAuthThrottled (429, Retry-After) answers a client address that
	// sent too many invalid keys, before its key is checked (AuthThrottle).
	CodeAuthThrottled = "AUTH_THROTTLED"
	// CodeOverloaded (503, Retry-After 1) answers a request whose body
	// would pass GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT.
	CodeOverloaded = "OVERLOADED"
)

// Header names the gateway sets on responses.
const (
	HeaderConnection = "X-Gatehouse-Connection"
	HeaderQueueMs    = "X-Gatehouse-Queue-Ms"
	HeaderGate       = "X-Gatehouse-Gate"
)

// style is an API dialect: the route's and a connection's apiStyle.
type style uint8

const (
	styleOpenAI style = iota
	styleAnthropic
	styleGemini
	numStyles
)

func (s style) String() string {
	switch s {
	case styleAnthropic:
		return "anthropic"
	case styleGemini:
		return "gemini"
	}
	return "openai"
}

// errorType is the `error.type` for a status, from Anthropic's vocabulary,
// which OpenAI's SDKs accept as well (they key on status and code).
func errorType(status int) string {
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

// apiError is a response the gateway makes itself.
type apiError struct {
	status     int
	code       string
	message    string
	retryAfter int    // whole seconds; 0 = no Retry-After header
	gate       string // X-Gatehouse-Gate; "" = none
}

// appendErrorJSON appends e in the given dialect's error shape:
// OpenAI {"error":{"message","type","code"}}, Anthropic
// {"type":"error","error":{"type","message","code"}}.
func appendErrorJSON(dst []byte, st style, e *apiError) []byte {
	if st == styleGemini {
		return appendGeminiError(dst, e)
	}
	if st == styleAnthropic {
		dst = append(dst, `{"type":"error","error":{"type":`...)
		dst = usage.AppendJSONString(dst, errorType(e.status))
		dst = append(dst, `,"message":`...)
		dst = usage.AppendJSONString(dst, e.message)
		dst = append(dst, `,"code":`...)
		dst = usage.AppendJSONString(dst, e.code)
		return append(dst, "}}"...)
	}
	dst = append(dst, `{"error":{"message":`...)
	dst = usage.AppendJSONString(dst, e.message)
	dst = append(dst, `,"type":`...)
	dst = usage.AppendJSONString(dst, errorType(e.status))
	dst = append(dst, `,"code":`...)
	dst = usage.AppendJSONString(dst, e.code)
	return append(dst, "}}"...)
}

// writeError sends e as a complete JSON response. It must be called before
// anything else was written.
func writeError(w http.ResponseWriter, st style, e *apiError) {
	body := appendErrorJSON(make([]byte, 0, 160+len(e.message)), st, e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	if e.gate != "" {
		h.Set(HeaderGate, e.gate)
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// appendSSEError appends e as a server-sent event, for a stream that has
// already started: Anthropic's `event: error`, or OpenAI's bare data line.
func appendSSEError(dst []byte, st style, e *apiError) []byte {
	if st == styleAnthropic {
		dst = append(dst, "event: error\n"...)
	}
	dst = append(dst, "data: "...)
	dst = appendErrorJSON(dst, st, e)
	return append(dst, "\n\n"...)
}

// maxQuotedModel is the most characters of a client's model name an error
// message quotes: a 30 MB name must not come back in a 404.
const maxQuotedModel = 128

// quoteModel quotes a client's model name for an error message, cut to
// maxQuotedModel characters on a rune boundary ("…" marks the cut).
func quoteModel(model string) string {
	n := 0
	for i := range model {
		if n == maxQuotedModel {
			return strconv.Quote(model[:i] + "…")
		}
		n++
	}
	return strconv.Quote(model)
}

// ceilSeconds rounds d up to whole seconds, at least 1, for Retry-After.
func ceilSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}
