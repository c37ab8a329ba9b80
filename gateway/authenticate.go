package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// authenticate checks r's client key and the gateway's state: the config in
// force and the key's state, or the error to send. x.keyName and x.key are
// set as soon as they are known (x.key only for an enabled key).
func (g *Gateway) authenticate(x *exchange, r *http.Request) (*state, *clientkey.State, *apiError) {
	secret := clientkey.Secret(r.Header)
	if secret == "" && x.st == wire.Gemini {
		secret = wire.GeminiKey(r)
	}
	if secret == "" {
		return nil, nil, errMissingKey(x.st)
	}
	// The key is checked first: a valid key is served even from an address
	// throttled for others' invalid ones (a fleet behind one NAT keeps
	// working beside one stale agent); only a failure is throttled.
	var key ClientKey
	ok := false
	if g.auth != nil {
		key, ok = g.auth(r.Context(), secret)
	}
	if !ok {
		if wait := g.throttle.Wait(r); wait > 0 {
			return nil, nil, errAuthThrottled(wait)
		}
		g.throttle.Failed(r)
		return nil, nil, &apiError{Status: http.StatusUnauthorized, Code: CodeInvalidKey, Message: "invalid client key"}
	}
	x.keyName = key.Name
	if g.draining.Load() {
		return nil, nil, errShuttingDown
	}
	s := g.state.Load()
	if s == nil || g.closed.Load() {
		return nil, nil, &apiError{Status: http.StatusServiceUnavailable, Code: CodeNotReady, RetryAfter: 1,
			Message: "the gateway has no configuration loaded or is shutting down"}
	}
	x.key = g.keyOf(s, key)
	if x.key != nil {
		x.priority = x.key.Priority
	}
	if !key.Enabled {
		return nil, nil, errKeyDisabled(key.Name)
	}
	return s, x.key, nil
}

// errMissingKey is the 401 for a request without a client key, naming the
// places the route's clients put one.
func errMissingKey(st wire.Style) *apiError {
	where := "Authorization: Bearer <key> or x-api-key"
	if st == wire.Gemini {
		where = "x-goog-api-key, ?key= or Authorization: Bearer <key>"
	}
	return &apiError{Status: http.StatusUnauthorized, Code: CodeMissingKey, Message: "missing client key: send it as " + where}
}

// errAuthThrottled is the 429 for a client address that must wait before
// its next key is checked.
//
//go:noinline
func errAuthThrottled(wait time.Duration) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Code: CodeAuthThrottled,
		RetryAfter: max(int((wait+time.Second-1)/time.Second), 1),
		Message:    "too many invalid client keys from this address; try again later"}
}

// errKeyDisabled is the 403 for a disabled key. Not inlined: Quote's
// temporaries would sit in authenticate's frame.
//
//go:noinline
func errKeyDisabled(name string) *apiError {
	return &apiError{Status: http.StatusForbidden, Code: CodeKeyDisabled,
		Message: "client key " + strconv.Quote(name) + " is disabled"}
}
