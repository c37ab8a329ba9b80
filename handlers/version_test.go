package handlers

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/google/go-cmp/cmp"
)

func TestIfMatch(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	tests := []struct {
		name    string
		ifMatch func(etag string) string
		method  string
		want    int
	}{
		{"current version", func(e string) string { return e }, http.MethodPatch, http.StatusOK},
		{"any", func(string) string { return "*" }, http.MethodPatch, http.StatusOK},
		{"one of several", func(e string) string { return `"999", ` + e }, http.MethodPatch, http.StatusOK},
		{"stale", func(string) string { return `"999"` }, http.MethodPatch, http.StatusPreconditionFailed},
		{"weak never matches", func(e string) string { return "W/" + e }, http.MethodPatch, http.StatusPreconditionFailed},
		{"garbage", func(string) string { return "nonsense" }, http.MethodPatch, http.StatusPreconditionFailed},
		{"stale put", func(string) string { return `"999"` }, http.MethodPut, http.StatusPreconditionFailed},
		{"stale delete", func(string) string { return `"999"` }, http.MethodDelete, http.StatusPreconditionFailed},
		{"stale delete among several", func(string) string { return `"998", "999"` }, http.MethodDelete, http.StatusPreconditionFailed},
		{"current delete", func(e string) string { return e }, http.MethodDelete, http.StatusNoContent},
		{"delete one of several", func(e string) string { return `"999", ` + e }, http.MethodDelete, http.StatusNoContent},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := connectionBody(fmt.Sprintf("ifmatch-%d", i))
			id := a.createConnection(t, body)["id"].(string)
			before := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)
			c := call{method: tt.method, path: path("connections", id),
				header: map[string]string{"If-Match": tt.ifMatch(before.header.Get("ETag"))}}
			switch tt.method {
			case http.MethodPatch:
				c.body = `{"priority":7}`
			case http.MethodPut:
				c.body = before.body
			}
			r := a.do(t, c)
			if tt.want != http.StatusPreconditionFailed {
				r.want(t, tt.want)
				return
			}
			problemOf(t, r, http.StatusPreconditionFailed)
			after := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)
			if diff := cmp.Diff(string(before.body), string(after.body)); diff != "" {
				t.Errorf("a failed precondition changed the row (-before +after):\n%s", diff)
			}
		})
	}
}

// TestConcurrentPatches: patches of different fields without If-Match both survive
// (each merges into the row under its lock); patches with the same If-Match admit one.
func TestConcurrentPatches(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	tests := []struct {
		name    string
		ifMatch bool
	}{
		{"different fields both survive", false},
		{"same If-Match admits one", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := connectionBody(fmt.Sprintf("concurrent-%d", i))
			c := a.createConnection(t, body)
			id := c["id"].(string)
			header := map[string]string{}
			if tt.ifMatch {
				header["If-Match"] = `"1"`
			}
			patches := []string{
				`{"rateLimitOverrides":{"modelConcurrency":{"glm-5":2}}}`,
				`{"priority":9,"rateLimitOverrides":{"maxConcurrent":6}}`,
			}
			statuses := make([]int, len(patches))
			var wg sync.WaitGroup
			for j, p := range patches {
				wg.Go(func() {
					statuses[j] = a.do(t, call{method: http.MethodPatch, path: path("connections", id), body: p, header: header}).status
				})
			}
			wg.Wait()
			got := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)
			if !tt.ifMatch {
				if diff := cmp.Diff([]int{http.StatusOK, http.StatusOK}, statuses); diff != "" {
					t.Fatalf("statuses (-want +got):\n%s", diff)
				}
				want := jsonValue(t, `{"maxConcurrent":6,"modelConcurrency":{"glm-5":2}}`)
				if diff := cmp.Diff(want, overridesOf(t, got.body)); diff != "" {
					t.Errorf("a patch was lost (-want +got):\n%s", diff)
				}
				if p := got.json(t)["priority"]; p != 9.0 {
					t.Errorf("priority = %v, want 9", p)
				}
				return
			}
			slices.Sort(statuses)
			if diff := cmp.Diff([]int{http.StatusOK, http.StatusPreconditionFailed}, statuses); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			if et := got.header.Get("ETag"); et != `"2"` {
				t.Errorf("ETag = %s, want \"2\" (exactly one write)", et)
			}
		})
	}
}

func TestSettings(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	r := a.do(t, call{method: http.MethodGet, path: path("settings"), token: a.viewer}).want(t, http.StatusOK)
	etag1 := r.header.Get("ETag")

	r = a.do(t, call{method: http.MethodPatch, path: path("settings"), contentType: httpkit.MergePatchContentType,
		body:   `{"defaultExecutionMaxWaitMs":300000,"providers":{"zai":{"maxConcurrent":8,"maxWaitMs":1000}},"version":77}`,
		header: map[string]string{"If-Match": etag1}}).want(t, http.StatusOK)
	got := r.json(t)
	delete(got, "updatedAt")
	want := jsonValue(t, `{"globalMaxConcurrent":0,"defaultMaxWaitMs":30000,"defaultExecutionMaxWaitMs":300000,
		"defaultMaxQueueDepth":0,"maxAttempts":3,"suspendMs":1800000,"breakerFailures":5,"breakerCooldownMs":30000,"priorityAgingMs":10000,
		"defaultOutputReserve":4096,"maxOutputReserve":65536,"affinityTtlMs":300000,"maxAffinityBindings":100000,"affinityMaxWaitMs":2000,"sessionMaxConcurrent":0,"sessionBudgetUsd":0,"loopLimit":0,"loopWindowMs":600000,"alertCooldownMs":900000,
		"providers":{"zai":{"maxConcurrent":8,"maxWaitMs":1000}},"version":2}`)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("settings after patch (-want +got):\n%s", diff)
	}

	// A stale If-Match changes nothing.
	problemOf(t, a.do(t, call{method: http.MethodPatch, path: path("settings"), body: `{"maxAttempts":2}`,
		header: map[string]string{"If-Match": etag1}}), http.StatusPreconditionFailed)
	// Every problem at once, with paths.
	p := problemOf(t, a.do(t, call{method: http.MethodPatch, path: path("settings"), invalidRequest: true,
		body: `{"maxAttempts":0,"defaultOutputReserve":0,"suspendMs":"1","providers":{"Bad":{"maxConcurrent":1},"zai":{"maxWaitMs":-1}},"tmp":1}`}),
		http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"defaultOutputReserve", "maxAttempts", "providers.Bad", "providers.zai.maxWaitMs", "suspendMs", "tmp"}, fields(p)); diff != "" {
		t.Errorf("settings errors (-want +got):\n%s", diff)
	}
	// One provider key removed, the rest kept.
	r = a.do(t, call{method: http.MethodPatch, path: path("settings"), body: `{"providers":{"zai":{"maxWaitMs":null}}}`}).
		want(t, http.StatusOK)
	got = r.json(t)
	if diff := cmp.Diff(jsonValue(t, `{"zai":{"maxConcurrent":8}}`), got["providers"]); diff != "" {
		t.Errorf("providers after removing one key (-want +got):\n%s", diff)
	}
	if got["version"] != 3.0 || r.header.Get("ETag") != `"3"` {
		t.Errorf("version %v, ETag %s; want 3", got["version"], r.header.Get("ETag"))
	}
}

// TestSettingsShowDefaults: GET /api/v1/settings shows the value in force for every
// key (DESIGN.md's defaults for the absent ones), while writes store only what was set:
// null removes a key and its default shows again.
func TestSettingsShowDefaults(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	defaults := `"globalMaxConcurrent":0,"defaultMaxWaitMs":30000,"defaultExecutionMaxWaitMs":600000,
		"defaultMaxQueueDepth":0,"maxAttempts":3,"suspendMs":1800000,"breakerFailures":5,"breakerCooldownMs":30000,"priorityAgingMs":10000,
		"defaultOutputReserve":4096,"maxOutputReserve":65536,"affinityTtlMs":300000,"maxAffinityBindings":100000,"affinityMaxWaitMs":2000,"sessionMaxConcurrent":0,"sessionBudgetUsd":0,"loopLimit":0,"loopWindowMs":600000,"alertCooldownMs":900000`
	tests := []struct {
		name  string
		patch string // empty: a GET
		want  string
	}{
		{"fresh", "", `{` + defaults + `,"providers":{},"version":1}`},
		{"one key set", `{"defaultMaxWaitMs":45000}`,
			`{` + strings.Replace(defaults, `"defaultMaxWaitMs":30000`, `"defaultMaxWaitMs":45000`, 1) + `,"providers":{},"version":2}`},
		{"key removed", `{"defaultMaxWaitMs":null}`, `{` + defaults + `,"providers":{},"version":3}`},
		{"output reserve set", `{"defaultOutputReserve":256}`,
			`{` + strings.Replace(defaults, `"defaultOutputReserve":4096`, `"defaultOutputReserve":256`, 1) + `,"providers":{},"version":4}`},
		{"output reserve removed", `{"defaultOutputReserve":null}`, `{` + defaults + `,"providers":{},"version":5}`},
	}
	for _, tt := range tests { // in order: each step builds on the one before
		c := call{method: http.MethodGet, path: path("settings"), token: a.viewer}
		if tt.patch != "" {
			c = call{method: http.MethodPatch, path: path("settings"), contentType: httpkit.MergePatchContentType, body: tt.patch}
		}
		got := a.do(t, c).want(t, http.StatusOK).json(t)
		delete(got, "updatedAt")
		if diff := cmp.Diff(jsonValue(t, tt.want), got); diff != "" {
			t.Errorf("%s: settings (-want +got):\n%s", tt.name, diff)
		}
	}
	st, err := a.store.GetSettings(t.Context())
	if err != nil {
		t.Fatalf("get settings: %v", err)
	}
	if string(st.Data) != "{}" {
		t.Errorf("stored settings = %s, want {} (defaults are shown, not stored)", st.Data)
	}
}
