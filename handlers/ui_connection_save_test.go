package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/handlers/ui"
	"github.com/gatehouse-dev/gatehouse/store"
)

func TestDashConnectionFormErrors(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	typed := url.Values{
		"name": {"bad name"}, "provider": {"zai"}, "apiStyle": {"openai"}, "baseUrl": {"ftp://x"},
		"apiKey": {"sk-1234"}, "priority": {"0"}, "models": {""}, "enabled": {"false", "true"},
		"maxConcurrent": {"abc"}, "modelConcurrency": {"glm-5=0\nglm-4.7=3\nnope"},
		"executionMaxWaitMs": {"600001"},
	}
	res := d.post(t, c, "/connections/new", typed).want(t, http.StatusUnprocessableEntity)
	want := map[string][]string{
		"name":               {"use 1 to 64 of letters, digits, dot, dash and underscore"},
		"baseUrl":            {"enter an absolute http:// or https:// URL with a host and no query, fragment or credentials"},
		"models":             {"must have at least 1 item"},
		"maxConcurrent":      {"must be a whole number from 0 to 10000"},
		"executionMaxWaitMs": {"must be a whole number from 0 to 600000"},
		"modelConcurrency": {
			`line 1: "glm-5=0": cap must be a whole number from 1 to 10000`,
			`line 3: "nope": expected model=cap, like glm-5=2`,
		},
	}
	got := map[string][]string{}
	for field := range want {
		got[field] = texts(res.testid("error-" + field).Find("li"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors beside fields mismatch (-want +got):\n%s", diff)
	}
	if v, _ := res.testid("field-name").Attr("aria-invalid"); v != "true" {
		t.Error("name not marked aria-invalid")
	}
	if v, _ := res.testid("field-name").Attr("value"); v != "bad name" {
		t.Errorf("typed name not kept: %q", v)
	}
	if v := res.testid("field-modelConcurrency").Text(); !strings.Contains(v, "glm-5=0\nglm-4.7=3\nnope") {
		t.Errorf("typed caps not kept: %q", v)
	}
	if v, _ := res.testid("field-apiKey").Attr("value"); v != "" {
		t.Errorf("the API key was sent back: %q", v)
	}
	if _, open := res.testid("advanced").Attr("open"); !open {
		t.Error("Advanced is closed although one of its fields has an error")
	}
	if cs, _ := d.store.ListConnections(t.Context()); len(cs) != 0 {
		t.Errorf("a bad form created %d connections", len(cs))
	}
}

// TestDashConnectionFormErrorsPortuguese posts the same bad form as a pt-BR user: every
// problem beside its field is worded from the pt-BR catalog, the textarea's line errors
// included, and nothing is saved.
func TestDashConnectionFormErrorsPortuguese(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	d.get(t, c, "/connections/new?lang=pt-BR").want(t, http.StatusOK) // the cookie keeps the choice
	typed := url.Values{
		"name": {"bad name"}, "provider": {"Z AI"}, "apiStyle": {"openai"}, "baseUrl": {"ftp://x"},
		"apiKey": {"sk-1234"}, "priority": {"0"}, "models": {""}, "enabled": {"false", "true"},
		"maxConcurrent": {"abc"}, "modelConcurrency": {"glm-5=0\nglm-4.7=3\nnope\nglm-4.7=1"},
		"maxWaitMs": {"120001"},
	}
	res := d.post(t, c, "/connections/new", typed).want(t, http.StatusUnprocessableEntity)
	want := map[string][]string{
		"name":          {"use de 1 a 64 letras, dígitos, ponto, hífen e sublinhado"},
		"provider":      {"use de 1 a 32 caracteres entre a-z, 0-9 e -"},
		"baseUrl":       {"informe uma URL absoluta http:// ou https://, com host e sem query, fragmento ou credenciais"},
		"models":        {"deve ter pelo menos 1 item"},
		"maxConcurrent": {"deve ser um número inteiro de 0 a 10000"},
		"maxWaitMs":     {"deve ser um número inteiro de 0 a 120000"},
		"modelConcurrency": {
			`linha 1: "glm-5=0": o limite deve ser um número inteiro de 1 a 10000`,
			`linha 3: "nope": esperado modelo=limite, como glm-5=2`,
			`linha 4: "glm-4.7=1": o modelo "glm-4.7" já tem limite na linha 2`,
		},
	}
	got := map[string][]string{}
	for field := range want {
		got[field] = texts(res.testid("error-" + field).Find("li"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pt-BR errors beside fields mismatch (-want +got):\n%s", diff)
	}
	if cs, _ := d.store.ListConnections(t.Context()); len(cs) != 0 {
		t.Errorf("a bad form created %d connections", len(cs))
	}

	// A malformed stored value (edited by hand) is named in pt-BR as well.
	conn := d.createConnection(t, "hand-edited", `{"maxWaitMs":-5}`)
	warnings := texts(d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK).testid("warning"))
	wantWarning := "! Um valor armazenado não pôde ser lido e vale como sem limite até ser salvo de novo: " +
		"rateLimitOverrides.maxWaitMs: deve ser um número inteiro de 0 a 120000"
	if diff := cmp.Diff([]string{wantWarning}, warnings); diff != "" {
		t.Errorf("stored-value warning mismatch (-want +got):\n%s", diff)
	}
}

func TestDashCreateEditAndList(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/connections/new").want(t, http.StatusOK).testid("connection-form"))
	form.Set("name", "zai-main")
	form.Set("provider", "zai")
	form.Set("baseUrl", "https://api.z.ai/api/paas/v4")
	form.Set("apiKey", "sk-secret-9f2c")
	form.Set("models", "glm-5\nglm-4.7\n")
	form.Set("maxConcurrent", "4")
	form.Set("modelConcurrency", "glm-5=1\n\nglm-4.7=3")
	res := d.post(t, c, "/connections/new", form).want(t, http.StatusSeeOther)
	loc := res.header.Get("Location")
	id := strings.TrimPrefix(loc, "/connections/")

	page := d.get(t, c, loc).want(t, http.StatusOK)
	if got := texts(page.testid("flash-message")); len(got) != 1 || !strings.HasSuffix(got[0], "Created zai-main.") {
		t.Errorf("flash %q", got)
	}
	if v := page.testid("field-modelConcurrency").Text(); strings.TrimPrefix(v, "\n") != "glm-4.7=3\nglm-5=1" {
		t.Errorf("caps textarea %q, want canonical order", v)
	}
	if diff := cmp.Diff(map[string]any{"maxConcurrent": 4.0, "modelConcurrency": map[string]any{"glm-5": 1.0, "glm-4.7": 3.0}},
		d.overrides(t, id)); diff != "" {
		t.Errorf("stored overrides mismatch (-want +got):\n%s", diff)
	}
	if ph, _ := page.testid("field-maxWaitMs").Attr("placeholder"); ph != "default 30000" {
		t.Errorf("maxWaitMs placeholder %q", ph)
	}

	// Edit: raise one cap; the flash says what changed.
	form = formValues(page.testid("connection-form"))
	form.Set("modelConcurrency", "glm-4.7=3\nglm-5=2")
	d.post(t, c, loc, form).want(t, http.StatusSeeOther)
	page = d.get(t, c, loc).want(t, http.StatusOK)
	if got := texts(page.testid("flash-message")); len(got) != 1 || !strings.HasSuffix(got[0], "Saved zai-main: glm-5 cap 1 → 2") {
		t.Errorf("flash %q", got)
	}
	if page.testid("last-change").Length() != 1 || !strings.Contains(page.testid("last-change").Text(), "admin@example.com") {
		t.Errorf("last change footer: %q", page.testid("last-change").Text())
	}

	// The list shows live load from the gateway.
	d.gates.set(live.Snapshot{Gates: []live.Gate{
		withLoad(connGate(id), live.Gate{Cap: 4, InFlight: 3, Queued: 1}),
		withLoad(modelGate(id, "glm-5"), live.Gate{Cap: 2, InFlight: 2, Queued: 5}),
	}})
	list := d.get(t, c, "/connections").want(t, http.StatusOK)
	row := list.doc.Find(`[data-testid="connection-row"][data-conn="` + id + `"]`)
	if row.Length() != 1 {
		t.Fatalf("no row for the connection:\n%s", list.body)
	}
	if txt := row.Text(); !strings.Contains(txt, "zai-main") || !strings.Contains(txt, "3") || !strings.Contains(txt, "6") {
		t.Errorf("row text %q lacks name, in-flight 3 or queued 6", txt)
	}

	// The overview draws the gates; /live serves the gates JSON.
	ov := d.get(t, c, "/").want(t, http.StatusOK)
	if ov.doc.Find(`[data-gate="`+modelGate(id, "glm-5").Key+`"]`).Length() == 0 {
		t.Errorf("overview has no glm-5 gate:\n%s", ov.body)
	}
	lv := d.get(t, c, "/live").want(t, http.StatusOK)
	var v ui.LiveView
	if err := json.Unmarshal([]byte(lv.body), &v); err != nil || len(v.Gates) != 2 {
		t.Errorf("/live: %v %s", err, lv.body)
	}
	// The list's script reads each row's load from connectionLoad (it never builds a
	// gate key): the same numbers as the rendered row.
	if got, want := v.ConnectionLoad[id], (ui.ConnLoadView{InFlight: 3, Queued: 6}); got != want {
		t.Errorf("/live connectionLoad[%s] = %+v, want %+v", id, got, want)
	}
}

func TestDashSaveKeepsKeysTheFormDoesNotShow(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "zai-main", `{"maxConcurrent":4,"executionMaxWaitMs":300000,"tpd":5000000000}`)
	c := d.signIn(t, "admin@example.com")

	// The form as rendered, only the name changed.
	form := formValues(d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK).testid("connection-form"))
	form.Set("name", "zai-renamed")
	d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusSeeOther)
	want := map[string]any{"maxConcurrent": 4.0, "executionMaxWaitMs": 300000.0, "tpd": 5e9}
	if diff := cmp.Diff(want, d.overrides(t, conn.ID)); diff != "" {
		t.Errorf("after a rename (-want +got):\n%s", diff)
	}

	// A form that predates the Advanced fields (they are absent) cannot erase them;
	// a field present but blank removes its key.
	cur, _ := d.store.GetConnection(t.Context(), conn.ID)
	old := url.Values{"version": {strconv.FormatInt(cur.Version, 10)}, "name": {"zai-main"}, "maxConcurrent": {""}}
	d.post(t, c, "/connections/"+conn.ID, old).want(t, http.StatusSeeOther)
	want = map[string]any{"executionMaxWaitMs": 300000.0, "tpd": 5e9}
	if diff := cmp.Diff(want, d.overrides(t, conn.ID)); diff != "" {
		t.Errorf("after an old form (-want +got):\n%s", diff)
	}
	if got, _ := d.store.GetConnection(t.Context(), conn.ID); got.Name != "zai-main" || got.APIKeyPreview != conn.APIKeyPreview {
		t.Errorf("name %q preview %q", got.Name, got.APIKeyPreview)
	}
}

func TestDashStaleSaveConflicts(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "zai-main", `{"maxConcurrent":4}`)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK).testid("connection-form"))

	// Someone else saves first.
	if _, err := d.store.UpdateConnection(t.Context(), "token:ci", conn.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
		in := cur.Input()
		in.RateLimitOverrides = json.RawMessage(`{"maxConcurrent":8}`)
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}

	form.Set("maxConcurrent", "2")
	res := d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusConflict)
	banner := res.testid("conflict")
	if banner.Length() != 1 || !strings.Contains(banner.Text(), "token:ci") {
		t.Errorf("conflict banner %q does not name who saved", banner.Text())
	}
	if href, _ := res.testid("conflict-reload").Attr("href"); href != "/connections/"+conn.ID {
		t.Errorf("reload link %q", href)
	}
	if v, _ := res.testid("field-maxConcurrent").Attr("value"); v != "2" {
		t.Errorf("typed value not kept: %q", v)
	}
	if diff := cmp.Diff(map[string]any{"maxConcurrent": 8.0}, d.overrides(t, conn.ID)); diff != "" {
		t.Errorf("the other save was overwritten (-want +got):\n%s", diff)
	}
}

// TestDashAffinityOverrides: unticking "Session affinity" stores affinity
// false and drainAtPercent is saved as typed; ticking it again and blanking
// the percentage remove both keys (the defaults).
func TestDashAffinityOverrides(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "claude-max", `{"maxConcurrent":4}`)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK).testid("connection-form"))
	form["affinity"] = []string{"false"}
	form.Set("drainAtPercent", "90")
	d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusSeeOther)
	want := map[string]any{"maxConcurrent": 4.0, "affinity": false, "drainAtPercent": 90.0}
	if diff := cmp.Diff(want, d.overrides(t, conn.ID)); diff != "" {
		t.Errorf("affinity unticked (-want +got):\n%s", diff)
	}
	form = formValues(d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK).testid("connection-form"))
	if got := form["affinity"]; len(got) != 1 || got[0] != "false" {
		t.Errorf("the stored affinity false renders as %v, want the box unticked", got)
	}
	form["affinity"] = []string{"false", "true"}
	form.Set("drainAtPercent", "")
	d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusSeeOther)
	if diff := cmp.Diff(map[string]any{"maxConcurrent": 4.0}, d.overrides(t, conn.ID)); diff != "" {
		t.Errorf("affinity ticked again (-want +got):\n%s", diff)
	}
	form = formValues(d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK).testid("connection-form"))
	form.Set("drainAtPercent", "101")
	bad := d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusUnprocessableEntity)
	if got := texts(bad.testid("error-drainAtPercent").Find("li")); len(got) != 1 || got[0] != "must be a whole number from 1 to 100" {
		t.Errorf("drainAtPercent 101: errors beside the field %q", got)
	}
	if diff := cmp.Diff(map[string]any{"maxConcurrent": 4.0}, d.overrides(t, conn.ID)); diff != "" {
		t.Errorf("a refused form wrote (-want +got):\n%s", diff)
	}
}
