package httpkit

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Access is what an API route requires of its caller.
type Access int

const (
	// AccessPublic needs no token (the OpenAPI document).
	AccessPublic Access = iota
	// AccessRead needs any API token: a viewer's or an admin's.
	AccessRead
	// AccessWrite needs an admin token.
	AccessWrite
	// AccessAdmin needs an admin token for a read: what it shows is for admins only
	// (the whole configuration document).
	AccessAdmin
)

// tokenKey is the context key of the authenticated store.APIToken.
type tokenKey struct{}

// wwwAuthenticate is the challenge sent with every 401.
const wwwAuthenticate = `Bearer realm="gatehouse"`

// Authenticate finds the API token in r's Authorization header and checks it against
// need. It returns a 401 apiError (with a challenge) for a missing or unknown token and
// a 403 for a viewer token on a write.
func (s *Core) Authenticate(r *http.Request, need Access) (store.APIToken, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return store.APIToken{}, unauthorized("an API token is required: send Authorization: Bearer <token>", "")
	}
	scheme, secret, ok := strings.Cut(h, " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return store.APIToken{}, unauthorized("the Authorization header must be Bearer <token>", "invalid_request")
	}
	// The token is checked first: a valid one is served even from an address
	// throttled for others' invalid ones; only a failure is throttled.
	tok, err := s.store.LookupAPIToken(r.Context(), secret)
	if errors.Is(err, store.ErrNotFound) {
		if wait := s.authThrottle.Wait(r); wait > 0 {
			e := NewAPIError(http.StatusTooManyRequests, "too many invalid API tokens from this address; try again later")
			e.Header = http.Header{"Retry-After": {strconv.Itoa(max(int((wait+time.Second-1)/time.Second), 1))}}
			return store.APIToken{}, e
		}
		s.authThrottle.Failed(r)
		return store.APIToken{}, unauthorized("the API token is not valid", "invalid_token")
	}
	if err != nil {
		return store.APIToken{}, err
	}
	if need == AccessWrite && tok.Role != store.RoleAdmin {
		return store.APIToken{}, NewAPIError(http.StatusForbidden, "this API token may only read; writes need an admin token")
	}
	if need == AccessAdmin && tok.Role != store.RoleAdmin {
		return store.APIToken{}, NewAPIError(http.StatusForbidden, "this endpoint needs an admin token")
	}
	return tok, nil
}

// RequireToken serves next only to a caller with an API token of any role (viewer or
// admin); others get the API's 401 problem.
func (s *Core) RequireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.Authenticate(r, AccessRead); err != nil {
			s.WriteProblem(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unauthorized is a 401 with a Bearer challenge; code is the RFC 6750 error code, if any.
func unauthorized(detail, code string) *APIError {
	challenge := wwwAuthenticate
	if code != "" {
		challenge += `, error="` + code + `"`
	}
	return &APIError{
		Status: http.StatusUnauthorized,
		Detail: detail,
		Header: http.Header{"Www-Authenticate": {challenge}},
	}
}

// WithToken returns ctx carrying tok.
func WithToken(ctx context.Context, tok store.APIToken) context.Context {
	return context.WithValue(ctx, tokenKey{}, tok)
}

// Actor names the caller in the audit log: "token:<token name>".
func Actor(r *http.Request) string {
	tok, ok := r.Context().Value(tokenKey{}).(store.APIToken)
	if !ok {
		return "api"
	}
	return "token:" + tok.Name
}
