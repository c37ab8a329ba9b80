package handlers

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClientKeyWriteRules: a client key's name follows the connection-name rule and is
// unique (409 naming the field), and every bad limit is reported at once with its path
// under limits (422, nothing written).
func TestClientKeyWriteRules(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"team-a"}`}).want(t, http.StatusCreated)

	taken := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"team-a"}`}), http.StatusConflict)
	if diff := cmp.Diff([]string{"name"}, fields(taken)); diff != "" {
		t.Errorf("409 fields mismatch (-want +got):\n%s", diff)
	}
	tests := []struct {
		name, body string
		want       []string
	}{
		{"bad name", `{"name":"has space"}`, []string{"name"}},
		{"no name", `{"limits":{}}`, []string{"name"}},
		{"every bad limit", `{"name":"team-b","limits":{"weight":0,"maxConcurrent":-1,"maxWaitMs":120001,"rpm":1.5,"tpm":"1","tpd":1e11,"models":["ok","a b",3],"x":1}}`,
			[]string{"limits.maxConcurrent", "limits.maxWaitMs", "limits.models.1", "limits.models.2", "limits.rpm",
				"limits.tpd", "limits.tpm", "limits.weight", "limits.x"}},
		{"limits not an object", `{"name":"team-b","limits":[1]}`, []string{"limits"}},
		{"enabled not a bool", `{"name":"team-b","enabled":"yes"}`, []string{"enabled"}},
		{"unknown field", `{"name":"team-b","weight":3}`, []string{"weight"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: tt.body, invalidRequest: true}),
				http.StatusUnprocessableEntity)
			if diff := cmp.Diff(tt.want, fields(p)); diff != "" {
				t.Errorf("fields mismatch (-want +got):\n%s", diff)
			}
		})
	}
	list := a.do(t, call{method: http.MethodGet, path: path("client-keys")}).want(t, http.StatusOK).json(t)
	if items := list["items"].([]any); len(items) != 1 {
		t.Errorf("%d keys stored, want only team-a: rejected writes store nothing", len(items))
	}
}

// TestClientKeyPatchKeepsWhatItDoesNotName: a merge patch of one limit keeps the others,
// a null removes one, and a GET body written back changes nothing but the version.
func TestClientKeyPatchKeepsWhatItDoesNotName(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	k := a.do(t, call{method: http.MethodPost, path: path("client-keys"),
		body: `{"name":"team-a","limits":{"weight":2,"rpm":60,"models":["glm-5"]}}`}).want(t, http.StatusCreated)
	if k.header.Get("ETag") != `"1"` {
		t.Errorf("ETag of a new key = %q, want \"1\"", k.header.Get("ETag"))
	}
	id := k.json(t)["id"].(string)
	got := a.do(t, call{method: http.MethodPatch, path: path("client-keys", id), body: `{"limits":{"rpm":null,"tpd":1000}}`}).
		want(t, http.StatusOK).json(t)
	if diff := cmp.Diff(map[string]any{"weight": 2.0, "tpd": 1000.0, "models": []any{"glm-5"}}, got["limits"]); diff != "" {
		t.Errorf("limits after patch (-want +got):\n%s", diff)
	}
	back := a.do(t, call{method: http.MethodGet, path: path("client-keys", id)}).want(t, http.StatusOK)
	again := a.do(t, call{method: http.MethodPatch, path: path("client-keys", id), body: string(back.body)}).want(t, http.StatusOK).json(t)
	if diff := cmp.Diff(got["limits"], again["limits"]); diff != "" || again["name"] != "team-a" || again["version"] != 3.0 {
		t.Errorf("writing a GET body back changed the key: %v (limits -before +after:\n%s)", again, diff)
	}
	a.do(t, call{method: http.MethodDelete, path: path("client-keys", id),
		header: map[string]string{"If-Match": `"1"`}}).want(t, http.StatusPreconditionFailed)
	a.do(t, call{method: http.MethodDelete, path: path("client-keys", id),
		header: map[string]string{"If-Match": `"3"`}}).want(t, http.StatusNoContent)
}
