package upstreamtest

import (
	"net"
	"net/http"
	"strconv"
	"time"
)

// style is the provider dialect of a route: it decides the error shape.
type style int

const (
	styleOpenAI style = iota
	styleAnthropic
	styleGemini
)

// styleOf tells the dialect by the route and, for GET …/models, by the
// credential's form: x-goog-api-key or ?key= is Gemini's, anthropic-version
// Anthropic's.
func styleOf(rt route, r *http.Request) style {
	switch rt {
	case routeMessages, routeCountTokens:
		return styleAnthropic
	case routeGenerate, routeStreamGenerate, routeGeminiCount:
		return styleGemini
	case routeModels:
		if len(r.Header["Anthropic-Version"]) > 0 {
			return styleAnthropic
		}
		if len(r.Header["X-Goog-Api-Key"]) > 0 || r.URL.Query().Has("key") {
			return styleGemini
		}
	}
	return styleOpenAI
}

// openAIErrorKind returns the error type and code OpenAI uses for status.
func openAIErrorKind(status int) (typ, code string) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		return "permission_error", "access_denied"
	case http.StatusNotFound:
		return "invalid_request_error", "model_not_found"
	case http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded"
	}
	if status >= 500 {
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

// anthropicErrorType returns the error type Anthropic uses for status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// writeError answers status with an error body in the provider's shape:
// OpenAI {"error":{"message","type","param","code"}}, Anthropic
// {"type":"error","error":{"type","message"}}, Gemini
// {"error":{"code","message","status"}}.
func writeError(w http.ResponseWriter, st style, status int, msg string) {
	b := make([]byte, 0, 160+len(msg))
	if st == styleGemini {
		b = appendGeminiError(b, status, msg)
	} else if st == styleAnthropic {
		b = append(b, `{"type":"error","error":{"type":`...)
		b = appendJSONString(b, anthropicErrorType(status))
		b = append(b, `,"message":`...)
		b = appendJSONString(b, msg)
		b = append(b, `}}`...)
	} else {
		typ, code := openAIErrorKind(status)
		b = append(b, `{"error":{"message":`...)
		b = appendJSONString(b, msg)
		b = append(b, `,"type":`...)
		b = appendJSONString(b, typ)
		b = append(b, `,"param":null,"code":`...)
		if code == "" {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, code)
		}
		b = append(b, `}}`...)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeFailure answers an injected status failure.
func writeFailure(w http.ResponseWriter, st style, status int, retryAfter time.Duration) {
	if retryAfter > 0 {
		secs := (retryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
	}
	writeError(w, st, status, "upstreamtest: injected failure "+strconv.Itoa(status))
}

// resetConn drops the connection without a (complete) response. On
// HTTP/1 it hijacks the connection and closes it with SO_LINGER 0, so the
// peer sees a TCP reset; where hijacking is impossible (HTTP/2) it aborts
// the handler, which resets the stream.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// writeOverLimit answers a request over its key's MaxInFlight: 429 with an
// error body that names the concurrency limit, as providers do.
func writeOverLimit(w http.ResponseWriter, st style, limit int, retryAfter time.Duration) {
	if retryAfter > 0 {
		secs := (retryAfter + time.Second - 1) / time.Second
		w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
	}
	writeError(w, st, http.StatusTooManyRequests,
		"upstreamtest: too many concurrent requests (more than "+strconv.Itoa(limit)+" in flight for this key)")
}
