package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/google/go-cmp/cmp"
)

func TestProblems(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	id := a.createConnection(t, connectionBody("problems"))["id"].(string)
	tests := []struct {
		name       string
		call       call
		status     int
		wantFields []string
		wantHeader map[string]string
	}{
		{
			name:       "no token",
			call:       call{method: http.MethodGet, path: path("connections"), token: noToken},
			status:     http.StatusUnauthorized,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="gatehouse"`},
		},
		{
			name:       "wrong token",
			call:       call{method: http.MethodGet, path: path("connections"), token: "gh_at_nope"},
			status:     http.StatusUnauthorized,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="gatehouse", error="invalid_token"`},
		},
		{
			name: "not bearer",
			call: call{method: http.MethodGet, path: path("connections"), token: noToken,
				header: map[string]string{"Authorization": "Basic YTpi"}},
			status:     http.StatusUnauthorized,
			wantHeader: map[string]string{"WWW-Authenticate": `Bearer realm="gatehouse", error="invalid_request"`},
		},
		{
			name:   "viewer writes",
			call:   call{method: http.MethodPost, path: path("connections"), token: a.viewer, body: connectionBody("viewer")},
			status: http.StatusForbidden,
		},
		{
			name:   "viewer deletes",
			call:   call{method: http.MethodDelete, path: path("connections", id), token: a.viewer},
			status: http.StatusForbidden,
		},
		{
			name:   "unknown id",
			call:   call{method: http.MethodGet, path: path("connections", "6f1c0000-0000-4000-8000-000000000000")},
			status: http.StatusNotFound,
		},
		{
			name:   "malformed id",
			call:   call{method: http.MethodGet, path: path("connections", "nope")},
			status: http.StatusNotFound,
		},
		{
			name:   "unknown endpoint",
			call:   call{method: http.MethodGet, path: path("nothing-here")},
			status: http.StatusNotFound,
		},
		{
			name:       "method not allowed",
			call:       call{method: http.MethodDelete, path: path("settings")},
			status:     http.StatusMethodNotAllowed,
			wantHeader: map[string]string{"Allow": "GET, HEAD, PATCH"},
		},
		{
			name:       "name taken",
			call:       call{method: http.MethodPost, path: path("connections"), body: connectionBody("problems")},
			status:     http.StatusConflict,
			wantFields: []string{"name"},
		},
		{
			name:   "stale",
			call:   call{method: http.MethodPatch, path: path("connections", id), body: `{}`, header: map[string]string{"If-Match": `"5"`}},
			status: http.StatusPreconditionFailed,
		},
		{
			name: "too large",
			call: call{method: http.MethodPost, path: path("connections"), invalidRequest: true,
				body: `{"name":"` + strings.Repeat("x", httpkit.MaxBodyBytes) + `"}`},
			status: http.StatusRequestEntityTooLarge,
		},
		{
			name:   "not JSON media type",
			call:   call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"k"}`, contentType: "text/plain", invalidRequest: true},
			status: http.StatusUnsupportedMediaType,
		},
		{
			name:   "merge patch only for PATCH",
			call:   call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"k"}`, contentType: httpkit.MergePatchContentType, invalidRequest: true},
			status: http.StatusUnsupportedMediaType,
		},
		{
			name:   "malformed JSON",
			call:   call{method: http.MethodPost, path: path("connections"), body: `{"name":`, invalidRequest: true},
			status: http.StatusBadRequest,
		},
		{
			name:   "two JSON values",
			call:   call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"a"} {}`, invalidRequest: true},
			status: http.StatusBadRequest,
		},
		{
			name:   "empty body",
			call:   call{method: http.MethodPatch, path: path("settings"), body: ` `, invalidRequest: true},
			status: http.StatusBadRequest,
		},
		{
			name: "duplicate keys",
			call: call{method: http.MethodPatch, path: path("connections", id), invalidRequest: true,
				body: `{"rateLimitOverrides":{"modelConcurrency":{"glm-5":1,"glm-5":2}},"models":[{"a":1,"a":2}]}`},
			status:     http.StatusUnprocessableEntity,
			wantFields: []string{"models.0.a", "rateLimitOverrides.modelConcurrency.glm-5"},
		},
		{
			name:       "not an object",
			call:       call{method: http.MethodPost, path: path("connections"), body: `[1]`, invalidRequest: true},
			status:     http.StatusUnprocessableEntity,
			wantFields: []string{""},
		},
		{
			name:       "token fields",
			call:       call{method: http.MethodPost, path: path("api-tokens"), body: `{"name":"","role":"root","x":1}`, invalidRequest: true},
			status:     http.StatusUnprocessableEntity,
			wantFields: []string{"name", "role", "x"},
		},
		{
			name:       "key name null",
			call:       call{method: http.MethodPost, path: path("client-keys"), body: `{"name":null}`, invalidRequest: true},
			status:     http.StatusUnprocessableEntity,
			wantFields: []string{"name"},
		},
		{
			name:       "bad audit query",
			call:       call{method: http.MethodGet, path: path("audit") + "?cursor=x&limit=501", invalidRequest: true},
			status:     http.StatusBadRequest,
			wantFields: []string{"cursor", "limit"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := problemOf(t, a.do(t, tt.call), tt.status)
			if tt.wantFields != nil {
				if diff := cmp.Diff(tt.wantFields, fields(p)); diff != "" {
					t.Errorf("fields (-want +got):\n%s", diff)
				}
			}
		})
	}
	t.Run("headers", func(t *testing.T) {
		t.Parallel()
		for _, tt := range tests {
			for k, v := range tt.wantHeader {
				r := a.do(t, tt.call)
				if got := r.header.Get(k); got != v {
					t.Errorf("%s: %s = %q, want %q", tt.name, k, got, v)
				}
			}
		}
	})
}
