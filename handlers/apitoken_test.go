package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAPITokens(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	created := a.do(t, call{method: http.MethodPost, path: path("api-tokens"), body: `{"name":"reader"}`}).
		want(t, http.StatusCreated)
	tok := created.json(t)
	if tok["role"] != "viewer" {
		t.Errorf("role = %v, want the default viewer", tok["role"])
	}
	if loc := created.header.Get("Location"); loc != path("api-tokens", tok["id"].(string)) {
		t.Errorf("Location = %q", loc)
	}
	secret := tok["secret"].(string)

	// The new viewer token reads but does not write; the audit names the writer.
	a.do(t, call{method: http.MethodGet, path: path("connections"), token: secret}).want(t, http.StatusOK)
	problemOf(t, a.do(t, call{method: http.MethodPost, path: path("client-keys"), token: secret, body: `{"name":"x"}`}),
		http.StatusForbidden)
	audit := a.do(t, call{method: http.MethodGet, path: path("audit") + "?limit=1", token: secret}).want(t, http.StatusOK).json(t)
	entry := audit["items"].([]any)[0].(map[string]any)
	if entry["actor"] != "token:test-admin" || entry["entity"] != "api_token" || entry["action"] != "create" {
		t.Errorf("latest audit entry = %v, want token:test-admin creating an api_token", entry)
	}

	list := a.do(t, call{method: http.MethodGet, path: path("api-tokens")}).want(t, http.StatusOK).json(t)
	var names []string
	for _, it := range list["items"].([]any) {
		names = append(names, it.(map[string]any)["name"].(string))
	}
	if diff := cmp.Diff([]string{"test-admin", "test-viewer", "reader"}, names); diff != "" {
		t.Errorf("token names (-want +got):\n%s", diff)
	}

	a.do(t, call{method: http.MethodDelete, path: path("api-tokens", tok["id"].(string))}).want(t, http.StatusNoContent)
	problemOf(t, a.do(t, call{method: http.MethodGet, path: path("connections"), token: secret}), http.StatusUnauthorized)
	problemOf(t, a.do(t, call{method: http.MethodDelete, path: path("api-tokens", tok["id"].(string))}), http.StatusNotFound)
}

func TestAuditPaging(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	const keys = 5
	for i := range keys {
		a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: fmt.Sprintf(`{"name":"k%d"}`, i)}).
			want(t, http.StatusCreated)
	}
	// The two tokens of newTestAPI and the keys: newest first, two a page.
	var ids []int64
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > keys+2 {
			t.Fatalf("paging does not end")
		}
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		page := a.do(t, call{method: http.MethodGet, path: path("audit") + q}).want(t, http.StatusOK).json(t)
		for _, it := range page["items"].([]any) {
			ids = append(ids, int64(it.(map[string]any)["id"].(float64)))
		}
		next, ok := page["nextCursor"].(string)
		if !ok {
			break
		}
		if want := strconv.FormatInt(ids[len(ids)-1], 10); next != want {
			t.Fatalf("nextCursor = %s, want the last id %s", next, want)
		}
		cursor = next
	}
	if len(ids) != keys+2 {
		t.Fatalf("got %d entries, want %d", len(ids), keys+2)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] >= ids[i-1] {
			t.Fatalf("ids not strictly newest first: %v", ids)
		}
	}
}

// TestCreatedLocationIsReadable: the Location of a created API token or client key
// names a resource a GET answers (without the secret), and 404 once it is revoked.
func TestCreatedLocationIsReadable(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	tests := []struct {
		name     string
		resource string
		body     string
	}{
		{"api token", "api-tokens", `{"name":"reader"}`},
		{"client key", "client-keys", `{"name":"agents"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			created := a.do(t, call{method: http.MethodPost, path: path(tt.resource), body: tt.body}).want(t, http.StatusCreated)
			want := created.json(t)
			delete(want, "secret")
			loc := created.header.Get("Location")
			got := a.do(t, call{method: http.MethodGet, path: loc, token: a.viewer}).want(t, http.StatusOK).json(t)
			delete(want, "lastUsedAt")
			delete(got, "lastUsedAt")
			if tt.resource == "client-keys" {
				// Only the GET of one key shows its spend; a new key has spent nothing.
				if diff := cmp.Diff(map[string]any{"todayUsd": 0.0, "monthUsd": 0.0}, got["spend"]); diff != "" {
					t.Errorf("new key's spend mismatch (-want +got):\n%s", diff)
				}
				delete(got, "spend")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GET %s (-created +got):\n%s", loc, diff)
			}
			a.do(t, call{method: http.MethodDelete, path: loc}).want(t, http.StatusNoContent)
			problemOf(t, a.do(t, call{method: http.MethodGet, path: loc}), http.StatusNotFound)
			problemOf(t, a.do(t, call{method: http.MethodGet, path: path(tt.resource, "not-a-uuid")}), http.StatusNotFound)
		})
	}
}
