package handlers

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestClientKeyBudgetUSD: budgetUsdDaily and budgetUsdMonthly are written and
// read as dollars over the API (a merge patch removes one and keeps the
// other); more than 2 decimals, negatives and values past 1 000 000 are 422
// at their paths, nothing written.
func TestClientKeyBudgetUSD(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	k := a.do(t, call{method: http.MethodPost, path: path("client-keys"),
		body: `{"name":"team-a","limits":{"budgetUsdDaily":0.01,"budgetUsdMonthly":250.5}}`}).want(t, http.StatusCreated).json(t)
	if diff := cmp.Diff(map[string]any{"budgetUsdDaily": 0.01, "budgetUsdMonthly": 250.5}, k["limits"]); diff != "" {
		t.Errorf("limits of the new key (-want +got):\n%s", diff)
	}
	id := k["id"].(string)
	got := a.do(t, call{method: http.MethodPatch, path: path("client-keys", id), body: `{"limits":{"budgetUsdDaily":null}}`}).
		want(t, http.StatusOK).json(t)
	if diff := cmp.Diff(map[string]any{"budgetUsdMonthly": 250.5}, got["limits"]); diff != "" {
		t.Errorf("limits after removing the daily budget (-want +got):\n%s", diff)
	}
	p := problemOf(t, a.do(t, call{method: http.MethodPatch, path: path("client-keys", id),
		body: `{"limits":{"budgetUsdDaily":0.001,"budgetUsdMonthly":1000000.01}}`, invalidRequest: true}), http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"limits.budgetUsdDaily", "limits.budgetUsdMonthly"}, fields(p)); diff != "" {
		t.Errorf("422 fields (-want +got):\n%s", diff)
	}
	back := a.do(t, call{method: http.MethodGet, path: path("client-keys", id)}).want(t, http.StatusOK).json(t)
	if diff := cmp.Diff(got["limits"], back["limits"]); diff != "" {
		t.Errorf("a refused write changed the key (-before +after):\n%s", diff)
	}
}

// TestConfigClientKeyBudgetUSD: the config file carries a key's money budgets:
// applied from YAML, exported back as dollars, a bad one refused at its path.
func TestConfigClientKeyBudgetUSD(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	doc := "clientKeys:\n  - name: team-a\n    limits:\n      budgetUsdDaily: 5\n      budgetUsdMonthly: 100.25\n"
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc, contentType: yamlContentType}).want(t, http.StatusOK)
	var exported struct {
		ClientKeys []struct {
			Name   string         `json:"name"`
			Limits map[string]any `json:"limits"`
		} `json:"clientKeys"`
	}
	r := a.do(t, call{method: http.MethodGet, path: path("config")}).want(t, http.StatusOK)
	if err := json.Unmarshal(r.body, &exported); err != nil {
		t.Fatalf("export: %v\n%s", err, r.body)
	}
	if len(exported.ClientKeys) != 1 || cmp.Diff(map[string]any{"budgetUsdDaily": 5.0, "budgetUsdMonthly": 100.25}, exported.ClientKeys[0].Limits) != "" {
		t.Errorf("exported client keys %+v", exported.ClientKeys)
	}
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"),
		body: "clientKeys:\n  - name: team-a\n    limits:\n      budgetUsdDaily: 0.005\n", contentType: yamlContentType, invalidRequest: true}),
		http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"clientKeys[team-a].limits.budgetUsdDaily"}, fields(p)); diff != "" {
		t.Errorf("reported fields (-want +got):\n%s", diff)
	}
}
