package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/store"
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

// TestClientKeyBudgetUSDOddCasing: a money budget spelled in another case
// ("BudgetUsdDaily", "BUDGETUSDMONTHLY") is not taken for the budget (JSON
// decoding that folds case would): the PATCH is 422 naming each field as
// sent, with a message that says it is unknown, and nothing is written — not
// even the correctly spelled field beside it.
func TestClientKeyBudgetUSDOddCasing(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	k := a.do(t, call{method: http.MethodPost, path: path("client-keys"),
		body: `{"name":"team-a","limits":{"budgetUsdDaily":5}}`}).want(t, http.StatusCreated).json(t)
	id := k["id"].(string)
	for _, tc := range []struct {
		body   string
		fields []string
	}{
		{`{"limits":{"BudgetUsdDaily":0.01}}`, []string{"limits.BudgetUsdDaily"}},
		{`{"limits":{"BUDGETUSDDAILY":0.01}}`, []string{"limits.BUDGETUSDDAILY"}},
		{`{"limits":{"budgetusdmonthly":1}}`, []string{"limits.budgetusdmonthly"}},
		{`{"limits":{"budgetUsdDaily":1,"BUDGETUSDMONTHLY":1}}`, []string{"limits.BUDGETUSDMONTHLY"}},
	} {
		p := problemOf(t, a.do(t, call{method: http.MethodPatch, path: path("client-keys", id), body: tc.body, invalidRequest: true}),
			http.StatusUnprocessableEntity)
		if diff := cmp.Diff(tc.fields, fields(p)); diff != "" {
			t.Errorf("PATCH %s: 422 fields (-want +got):\n%s", tc.body, diff)
			continue
		}
		if msg := p.Errors[0].Message; !strings.Contains(strings.ToLower(msg), "unknown") {
			t.Errorf("PATCH %s: message %q does not say the field is unknown", tc.body, msg)
		}
	}
	back := a.do(t, call{method: http.MethodGet, path: path("client-keys", id)}).want(t, http.StatusOK).json(t)
	if diff := cmp.Diff(map[string]any{"budgetUsdDaily": 5.0}, back["limits"]); diff != "" {
		t.Errorf("refused writes changed the key (-want +got):\n%s", diff)
	}
}

// TestConfigClientKeyBudgetUSD: the config file carries a key's money budgets:
// applied from YAML, exported back as dollars, a bad one refused at its path.
func TestConfigClientKeyBudgetUSD(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	doc := "clientKeys:\n  - name: team-a\n    limits:\n      budgetUsdDaily: 5\n      budgetUsdMonthly: 100.25\n"
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc, contentType: api.YAMLContentType}).want(t, http.StatusOK)
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
		body: "clientKeys:\n  - name: team-a\n    limits:\n      budgetUsdDaily: 0.005\n", contentType: api.YAMLContentType, invalidRequest: true}),
		http.StatusUnprocessableEntity)
	if diff := cmp.Diff([]string{"clientKeys[team-a].limits.budgetUsdDaily"}, fields(p)); diff != "" {
		t.Errorf("reported fields (-want +got):\n%s", diff)
	}
}

// TestDashKeyBudgetUSD: /keys/{id} shows the money budgets in dollars, saves
// them, and words a bad one beside its field (en and pt-BR), writing nothing.
func TestDashKeyBudgetUSD(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{"budgetUsdMonthly":250.5}`)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK).testid("key-form"))
	if form.Get("budgetUsdMonthly") != "250.5" || form.Get("budgetUsdDaily") != "" {
		t.Fatalf("budget fields %q %q, want 250.5 and blank", form.Get("budgetUsdMonthly"), form.Get("budgetUsdDaily"))
	}
	form.Set("budgetUsdDaily", "0.01")
	d.post(t, c, "/keys/"+k.ID, form).want(t, http.StatusSeeOther)
	got, after := d.keyLimits(t, k.ID)
	if diff := cmp.Diff(map[string]any{"budgetUsdDaily": 0.01, "budgetUsdMonthly": 250.5}, got); diff != "" {
		t.Errorf("stored limits (-want +got):\n%s", diff)
	}
	for lang, want := range map[string]string{
		"en":    "must be a number of US dollars from 0 to 1000000 with at most 2 decimals",
		"pt-BR": "deve ser um valor em dólares americanos de 0 a 1000000 com no máximo 2 casas decimais",
	} {
		d.get(t, c, "/keys/"+k.ID+"?lang="+lang).want(t, http.StatusOK)
		res := d.post(t, c, "/keys/"+k.ID, url.Values{"version": {keyVersion(after)}, "budgetUsdDaily": {"0.001"}}).
			want(t, http.StatusUnprocessableEntity)
		if diff := cmp.Diff([]string{want}, texts(res.testid("error-budgetUsdDaily").Find("li"))); diff != "" {
			t.Errorf("%s: error beside budgetUsdDaily (-want +got):\n%s", lang, diff)
		}
		if res.testid("field-budgetUsdDaily").AttrOr("value", "") != "0.001" {
			t.Errorf("%s: the typed value is not kept", lang)
		}
	}
	if _, again := d.keyLimits(t, k.ID); again.Version != after.Version {
		t.Errorf("a bad form was written: version %d → %d", after.Version, again.Version)
	}
}

// TestDashKeyBudgetsAndSpend: the /keys list and the overview's key rows show
// each key's spend today and this month, "of" its money budgets when it has
// them (en and pt-BR), from the request log's spend.
func TestDashKeyBudgetsAndSpend(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	a := d.createKey(t, "team-a", `{"budgetUsdDaily":5,"budgetUsdMonthly":100}`)
	b := d.createKey(t, "team-b", `{}`)
	conn := "33333333-3333-4333-8333-333333333333"
	now := time.Now().UTC()
	row := func(key string, at time.Time, cost int64) store.RequestRow {
		return store.RequestRow{StartedAt: at, KeyID: key, ConnectionID: conn, UpstreamModel: "glm-5", Route: "chat",
			Status: 200, Attempts: 1, TTFTMs: -1, CostMicros: cost}
	}
	rows := []store.RequestRow{row(a.ID, now, 6_000), row(a.ID, now, 6_000), row(b.ID, now, 1_000)}
	monthA := "$0.012"
	if first := time.Date(now.Year(), now.Month(), 1, 12, 0, 0, 0, time.UTC); now.Day() > 1 {
		rows = append(rows, row(a.ID, first, 500_000)) // earlier this month: in the month's figure only
		monthA = "$0.512"
	}
	if err := d.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	c := d.signIn(t, "viewer@example.com")
	cell := func(p page, rowSel, id string) string {
		return strings.TrimSpace(p.doc.Find(rowSel).Find(`[data-testid="` + id + `"]`).Text())
	}
	for _, tc := range []struct{ lang, of string }{{"en", "of"}, {"pt-BR", "de"}} {
		keys := d.get(t, c, "/keys?lang="+tc.lang).want(t, http.StatusOK)
		got := []string{
			cell(keys, `tr[data-client="`+a.ID+`"]`, "key-spend-today"), cell(keys, `tr[data-client="`+a.ID+`"]`, "key-spend-month"),
			cell(keys, `tr[data-client="`+b.ID+`"]`, "key-spend-today"), cell(keys, `tr[data-client="`+b.ID+`"]`, "key-spend-month"),
		}
		want := []string{"$0.012 " + tc.of + " $5", monthA + " " + tc.of + " $100", "$0.001", "$0.001"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: /keys spend cells (-want +got):\n%s", tc.lang, diff)
		}
		ov := d.get(t, c, "/").want(t, http.StatusOK)
		got = []string{
			cell(ov, `tr[data-key="`+a.ID+`"]`, "key-spend"), cell(ov, `tr[data-key="`+a.ID+`"]`, "key-spend-month"),
			cell(ov, `tr[data-key="`+b.ID+`"]`, "key-spend"), cell(ov, `tr[data-key="`+b.ID+`"]`, "key-spend-month"),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: overview key rows' spend (-want +got):\n%s", tc.lang, diff)
		}
	}
}
