package handlers

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/google/go-cmp/cmp"
)

// TestConfigPricesCacheWrite: the prices' cachedInput and cacheWrite go out in
// an export and back in an apply unchanged (no change planned); a changed
// cacheWrite is planned and applied as one settings change; a bad one is
// reported with its path and nothing is written.
func TestConfigPricesCacheWrite(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	a.do(t, call{method: http.MethodPatch, path: path("settings"),
		body: `{"prices":{"anthropic/*":{"input":3,"output":15,"cachedInput":0.3,"cacheWrite":3.75}}}`}).want(t, http.StatusOK)
	exported := string(a.do(t, call{method: http.MethodGet, path: path("config") + "?format=yaml"}).want(t, http.StatusOK).body)
	for _, want := range []string{"cachedInput: 0.3", "cacheWrite: 3.75"} {
		if !strings.Contains(exported, want) {
			t.Fatalf("export lacks %q:\n%s", want, exported)
		}
	}
	if p := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=true",
		body: exported, contentType: api.YAMLContentType}).want(t, http.StatusOK)); p.Changed {
		t.Fatalf("export → apply plans %+v, want no change", p.Changes)
	}
	edited := strings.Replace(exported, "cacheWrite: 3.75", "cacheWrite: 6", 1)
	applied := planOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"),
		body: edited, contentType: api.YAMLContentType}).want(t, http.StatusOK))
	if len(applied.Changes) != 1 || applied.Changes[0].Entity != "settings" {
		t.Fatalf("applied plan %+v, want one settings change", applied.Changes)
	}
	want := []api.ConfigDiffLine{{Path: "prices.anthropic/*.cacheWrite", Op: "changed", Before: "3.75", After: "6"}}
	if diff := cmp.Diff(want, applied.Changes[0].Diff); diff != "" {
		t.Errorf("settings diff (-want +got):\n%s", diff)
	}
	got := a.do(t, call{method: http.MethodGet, path: path("settings")}).want(t, http.StatusOK).json(t)
	prices, _ := got["prices"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"input": 3.0, "output": 15.0, "cachedInput": 0.3, "cacheWrite": 6.0}, prices["anthropic/*"]); diff != "" {
		t.Errorf("stored price (-want +got):\n%s", diff)
	}

	before, audits := versions(t, a), auditCount(t, a)
	bad := strings.Replace(edited, "cacheWrite: 6", "cacheWrite: 10000.5", 1)
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: bad,
		contentType: api.YAMLContentType, invalidRequest: true}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"settings.prices.anthropic/*.cacheWrite"}, fields(p)); diff != "" {
		t.Errorf("reported fields (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, versions(t, a)); diff != "" || auditCount(t, a) != audits {
		t.Errorf("a rejected document wrote something (-before +after):\n%s", diff)
	}
}
