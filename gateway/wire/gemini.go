package wire

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// GeminiStatus is the google.rpc status name for an HTTP status.
func GeminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// appendGeminiError appends e in google.rpc's shape, as Google's APIs answer:
// {"error":{"code","message","status","details":[RetryInfo, ErrorInfo]}}.
// RetryInfo (when e has a Retry-After) is what Gemini clients back off by;
// ErrorInfo carries Gatehouse's code as its reason, and the gate.
func appendGeminiError(dst []byte, e *Error) []byte {
	dst = append(dst, `{"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Status), 10)
	dst = append(dst, `,"message":`...)
	dst = usage.AppendJSONString(dst, e.Message)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, GeminiStatus(e.Status)...)
	dst = append(dst, `","details":[`...)
	if e.RetryAfter > 0 {
		dst = append(dst, `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"`...)
		dst = strconv.AppendInt(dst, int64(e.RetryAfter), 10)
		dst = append(dst, `s"},`...)
	}
	dst = append(dst, `{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":`...)
	dst = usage.AppendJSONString(dst, e.Code)
	dst = append(dst, `,"domain":"gatehouse"`...)
	if e.Gate != "" {
		dst = append(dst, `,"metadata":{"gate":`...)
		dst = usage.AppendJSONString(dst, e.Gate)
		dst = append(dst, '}')
	}
	return append(dst, "}]}}"...)
}

// GeminiKey returns the client key Gemini clients send: x-goog-api-key, else
// the query's key.
func GeminiKey(r *http.Request) string {
	if v := r.Header["X-Goog-Api-Key"]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	if r.URL.RawQuery != "" {
		return strings.TrimSpace(r.URL.Query().Get("key"))
	}
	return ""
}

// UpstreamQuery is the query string an attempt sends upstream: none of the
// client's (its key may be there), except Gemini's alt (alt=sse asks for an
// event stream).
func UpstreamQuery(st Style, raw string) string {
	if st != Gemini || raw == "" {
		return ""
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		// Still take a well-formed alt from a query with other bad parts.
		q = url.Values{}
		for part := range strings.SplitSeq(raw, "&") {
			if v, ok := strings.CutPrefix(part, "alt="); ok {
				if v, err := url.QueryUnescape(v); err == nil {
					q.Set("alt", v)
				}
			}
		}
	}
	alt := q.Get("alt")
	if alt == "" {
		return ""
	}
	return "alt=" + url.QueryEscape(alt)
}
