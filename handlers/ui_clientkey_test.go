package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
)

// createKey adds a client key with limits through the store, as the API would.
func (d *dash) createKey(t *testing.T, name, limitsJSON string) store.ClientKey {
	t.Helper()
	in := store.NewClientKeyInput(name)
	in.Limits = json.RawMessage(limitsJSON)
	k, _, err := d.store.CreateClientKey(t.Context(), store.ActorSystem, in)
	if err != nil {
		t.Fatalf("create client key %s: %v", name, err)
	}
	return k
}

// keyLimits reads a key's stored limits and version.
func (d *dash) keyLimits(t *testing.T, id string) (map[string]any, store.ClientKey) {
	t.Helper()
	k, err := d.store.GetClientKey(t.Context(), id)
	if err != nil {
		t.Fatalf("get client key: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(k.Limits, &m); err != nil {
		t.Fatalf("decode limits: %v", err)
	}
	return m, k
}

func keyVersion(k store.ClientKey) string { return strconv.FormatInt(k.Version, 10) }

// TestDashKeysListsLimitsAndLiveLoad: /keys shows every key's limits and its live
// in-flight and queued counts from the snapshot's clients (by id; a key the gateway
// has not loaded yet shows nothing running against its stored cap), and each row
// links to the key's page.
func TestDashKeysListsLimitsAndLiveLoad(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	a := d.createKey(t, "team-a", `{"weight":1,"maxConcurrent":8,"rpm":120,"models":["zai/*"]}`)
	b := d.createKey(t, "team-b", `{"weight":3,"tpd":5000000}`)
	n := d.createKey(t, "team-new", `{"maxConcurrent":2}`) // not in the live view yet
	d.gates.set(live.Snapshot{Clients: []live.Client{
		{ID: b.ID, Name: "team-b", Weight: 3, InFlight: 4, Queued: 7},
		{ID: a.ID, Name: "team-a", Weight: 1, Cap: 8, InFlight: 8, Queued: 12},
	}})
	c := d.signIn(t, "viewer@example.com")
	res := d.get(t, c, "/keys").want(t, http.StatusOK)
	var got []string
	res.testid("keys-row").Each(func(_ int, row *goquery.Selection) {
		cells := []string{row.Find(`[data-testid="key-link"]`).AttrOr("href", "")}
		for _, id := range []string{"key-link", "key-weight", "key-maxConcurrent", "key-rpm", "key-tpd", "key-models", "key-inflight", "key-queued"} {
			cells = append(cells, strings.TrimSpace(row.Find(`[data-testid="`+id+`"]`).Text()))
		}
		got = append(got, strings.Join(cells, " | "))
	})
	want := []string{
		"/keys/" + a.ID + " | team-a | 1 | 8 | 120 /min | – | zai/* | 8 / 8 | 12",
		"/keys/" + b.ID + " | team-b | 3 | – | – | 5,000,000 tokens/day | all models | 4 / – | 7",
		"/keys/" + n.ID + " | team-new | 1 (default) | 2 | – | – | all models | 0 / 2 | 0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("key rows mismatch (-want +got):\n%s", diff)
	}
	if res.testid("keys-form").Length() != 0 {
		t.Error("a viewer sees the create form")
	}
}

// TestDashKeyEditSaves: the key's page loads its limits into fields named by their
// JSON names; setting every limit saves them through the store (a new version and
// an audit row by the user) and redirects to the page with a flash naming the
// changes; the page then shows the stored values.
func TestDashKeyEditSaves(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{"weight":1}`)
	c := d.signIn(t, "admin@example.com")
	edit := d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK)
	form := formValues(edit.testid("key-form"))
	if diff := cmp.Diff([]string{"1"}, form["weight"]); diff != "" {
		t.Errorf("weight field mismatch (-want +got):\n%s", diff)
	}
	for _, name := range []string{"maxConcurrent", "maxWaitMs", "rpm", "tpm", "tpd", "models", "priority", "enabled", "version"} {
		if _, ok := form[name]; !ok {
			t.Errorf("the form has no field %q", name)
		}
	}
	form.Set("weight", "3")
	form.Set("maxConcurrent", "8")
	form.Set("maxWaitMs", "5000")
	form.Set("rpm", "60")
	form.Set("tpm", "100000")
	form.Set("tpd", "1e7")
	form.Set("models", "zai/*\nglm-5")
	form.Set("priority", "batch")
	res := d.post(t, c, "/keys/"+k.ID, form).want(t, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/keys/"+k.ID {
		t.Errorf("redirect to %q, want the key's page", loc)
	}
	got, after := d.keyLimits(t, k.ID)
	want := map[string]any{"weight": 3.0, "maxConcurrent": 8.0, "maxWaitMs": 5000.0, "rpm": 60.0, "tpm": 100000.0, "tpd": 1e7,
		"models": []any{"zai/*", "glm-5"}, "priority": "batch"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored limits mismatch (-want +got):\n%s", diff)
	}
	if after.Version != k.Version+1 || !after.Enabled {
		t.Errorf("after save: version %d (was %d), enabled %v", after.Version, k.Version, after.Enabled)
	}
	entries, err := d.store.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntityClientKey, EntityID: k.ID}, 0, 1)
	if err != nil || len(entries) != 1 || entries[0].Actor != "user:admin@example.com" || entries[0].Action != store.ActionUpdate {
		t.Errorf("audit of the save: %+v, %v", entries, err)
	}
	page := d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK)
	if flash := texts(page.testid("flash-message")); len(flash) != 1 || !strings.Contains(flash[0], "Saved team-a: ") || !strings.Contains(flash[0], "maxConcurrent → 8") {
		t.Errorf("flash %q, want it to name the changes", flash)
	}
	if v := page.testid("field-weight").AttrOr("value", ""); v != "3" {
		t.Errorf("weight after reload %q, want 3", v)
	}
	if v := page.testid("field-models").Text(); v != "zai/*\nglm-5" {
		t.Errorf("models after reload %q", v)
	}
	if v, _ := page.testid("field-priority").Find("option[selected]").Attr("value"); v != "batch" {
		t.Errorf("priority after reload %q, want batch selected", v)
	}
	list := d.get(t, c, "/keys").want(t, http.StatusOK)
	if got := texts(list.testid("key-priority")); len(got) != 1 || got[0] != "batch" {
		t.Errorf("keys table priority %q, want batch", got)
	}
	// A class the list does not know is refused beside the field, nothing written.
	form = formValues(page.testid("key-form"))
	form.Set("priority", "urgent")
	bad := d.post(t, c, "/keys/"+k.ID, form).want(t, http.StatusUnprocessableEntity)
	if msg := texts(bad.testid("error-priority")); len(msg) != 1 || !strings.Contains(msg[0], "interactive, standard, batch") {
		t.Errorf("error beside priority %q", msg)
	}
	if got, _ := d.keyLimits(t, k.ID); got["priority"] != "batch" {
		t.Errorf("a refused class was written: %v", got["priority"])
	}
	if got := texts(page.testid("last-change")); len(got) != 1 || !strings.Contains(got[0], "admin@example.com (version "+keyVersion(after)+")") {
		t.Errorf("last change %q", got)
	}
}

// TestDashKeyInvalidFields posts one bad value at a time: the form comes back (422)
// with the error beside that field only, marked aria-invalid, with what was typed,
// and nothing is written.
func TestDashKeyInvalidFields(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{"weight":2,"models":["glm-5"]}`)
	c := d.signIn(t, "admin@example.com")
	pattern := "use provider/model, a bare model id or provider/*, 1 to 128 characters, with no spaces, '=' or ','"
	tests := []struct {
		field, value string
		want         []string
	}{
		{"weight", "0", []string{"must be a whole number from 1 to 1000"}},
		{"weight", "heavy", []string{"must be a whole number from 1 to 1000"}},
		{"maxConcurrent", "10001", []string{"must be a whole number from 0 to 10000"}},
		{"maxWaitMs", "-1", []string{"must be a whole number from 0 to 120000"}},
		{"rpm", "1.5", []string{"must be a whole number from 0 to 1000000"}},
		{"tpm", "1e9", []string{"must be a whole number from 0 to 100000000"}},
		{"tpd", "1e11", []string{"must be a whole number from 0 to 10000000000"}},
		{"models", "glm-5\n\nzai/x*\nglm-5", []string{
			`line 3: "zai/x*": ` + pattern,
			`line 4: "glm-5": model "glm-5" is already listed on line 1`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.field+"="+tt.value, func(t *testing.T) {
			form := url.Values{"version": {keyVersion(k)}, tt.field: {tt.value}}
			res := d.post(t, c, "/keys/"+k.ID, form).want(t, http.StatusUnprocessableEntity)
			if diff := cmp.Diff(tt.want, texts(res.testid("error-"+tt.field).Find("li"))); diff != "" {
				t.Errorf("error beside %s mismatch (-want +got):\n%s", tt.field, diff)
			}
			if n := res.doc.Find(`ul.field-errors`).Length(); n != 1 {
				t.Errorf("%d fields show errors, want only %s", n, tt.field)
			}
			f := res.testid("field-" + tt.field)
			if f.AttrOr("aria-invalid", "") != "true" {
				t.Errorf("%s not marked aria-invalid", tt.field)
			}
			typed := f.AttrOr("value", "")
			if tt.field == "models" {
				typed = strings.TrimPrefix(f.Text(), "\n")
			}
			if typed != tt.value {
				t.Errorf("typed %s not kept: %q, want %q", tt.field, typed, tt.value)
			}
			got, after := d.keyLimits(t, k.ID)
			if after.Version != k.Version || !cmp.Equal(map[string]any{"weight": 2.0, "models": []any{"glm-5"}}, got) {
				t.Errorf("a bad form was written: version %d → %d, limits %v", k.Version, after.Version, got)
			}
		})
	}
}

// TestDashKeyErrorsPortuguese: a pt-BR user's errors are worded from the pt-BR
// catalog, the models line error included.
func TestDashKeyErrorsPortuguese(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{}`)
	c := d.signIn(t, "admin@example.com")
	d.get(t, c, "/keys/"+k.ID+"?lang=pt-BR").want(t, http.StatusOK) // the cookie keeps the choice
	res := d.post(t, c, "/keys/"+k.ID, url.Values{"version": {keyVersion(k)}, "weight": {"0"}, "models": {"a\na"}}).
		want(t, http.StatusUnprocessableEntity)
	got := map[string][]string{
		"weight": texts(res.testid("error-weight").Find("li")),
		"models": texts(res.testid("error-models").Find("li")),
	}
	want := map[string][]string{
		"weight": {"deve ser um número inteiro de 1 a 1000"},
		"models": {`linha 2: "a": o modelo "a" já está na lista na linha 1`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pt-BR errors mismatch (-want +got):\n%s", diff)
	}
}

// TestDashKeyBlankIsAbsent: a field present but blank removes its key (weight then
// is the default), a field absent from the form keeps its key, and the enabled
// checkbox (hidden "false" first) switches the key off.
func TestDashKeyBlankIsAbsent(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{"weight":3,"rpm":60,"tpd":1000,"models":["glm-5"]}`)
	c := d.signIn(t, "admin@example.com")
	d.post(t, c, "/keys/"+k.ID, url.Values{
		"version": {keyVersion(k)}, "weight": {""}, "rpm": {"  "}, "models": {"\n \n"}, "enabled": {"false"},
	}).want(t, http.StatusSeeOther)
	got, after := d.keyLimits(t, k.ID)
	if diff := cmp.Diff(map[string]any{"tpd": 1000.0}, got); diff != "" {
		t.Errorf("stored limits mismatch (-want +got):\n%s", diff)
	}
	if after.Enabled {
		t.Error("the unchecked enabled box left the key enabled")
	}
	page := d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK)
	if v := page.testid("field-weight"); v.AttrOr("value", "?") != "" || v.AttrOr("placeholder", "") != "default 1" {
		t.Errorf("blank weight shows value %q placeholder %q, want blank with default 1", v.AttrOr("value", "?"), v.AttrOr("placeholder", ""))
	}
	// Checked again ("false" then "true", as a browser sends it), the key is back on.
	d.post(t, c, "/keys/"+k.ID, url.Values{"version": {keyVersion(after)}, "enabled": {"false", "true"}}).want(t, http.StatusSeeOther)
	if _, k2 := d.keyLimits(t, k.ID); !k2.Enabled {
		t.Error("the checked enabled box left the key disabled")
	}
}

// TestDashKeyModelsRoundTrip: the models textarea, typed with blank lines, spaces
// and CRLFs, is stored as the list of its entries in order and shown back one a line.
func TestDashKeyModelsRoundTrip(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{}`)
	c := d.signIn(t, "admin@example.com")
	d.post(t, c, "/keys/"+k.ID, url.Values{"version": {keyVersion(k)}, "models": {"  zai/*\r\n\r\nglm-5 \r\nopenai/gpt-4o\r\n"}}).
		want(t, http.StatusSeeOther)
	got, _ := d.keyLimits(t, k.ID)
	if diff := cmp.Diff(map[string]any{"models": []any{"zai/*", "glm-5", "openai/gpt-4o"}}, got); diff != "" {
		t.Errorf("stored limits mismatch (-want +got):\n%s", diff)
	}
	page := d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK)
	if v := strings.TrimPrefix(page.testid("field-models").Text(), "\n"); v != "zai/*\nglm-5\nopenai/gpt-4o" {
		t.Errorf("models textarea %q", v)
	}
	// Posting the page back unchanged changes nothing but the version.
	before, _ := d.keyLimits(t, k.ID)
	d.post(t, c, "/keys/"+k.ID, formValues(page.testid("key-form"))).want(t, http.StatusSeeOther)
	if again, _ := d.keyLimits(t, k.ID); !cmp.Equal(before, again) {
		t.Errorf("an unchanged form changed the limits: %v → %v", before, again)
	}
}

// TestDashKeyViewerForbidden: a viewer sees the key's page read-only, and their POST
// gets 403 and writes nothing.
func TestDashKeyViewerForbidden(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{"weight":2}`)
	c := d.signIn(t, "viewer@example.com")
	page := d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK)
	if page.testid("read-only").Length() != 1 || page.testid("save").Length() != 0 {
		t.Error("the viewer's page is not read-only")
	}
	if _, disabled := page.testid("field-weight").Attr("disabled"); !disabled {
		t.Error("the viewer's weight field is not disabled")
	}
	d.post(t, c, "/keys/"+k.ID, url.Values{"version": {keyVersion(k)}, "weight": {"9"}}).want(t, http.StatusForbidden)
	if got, after := d.keyLimits(t, k.ID); after.Version != k.Version || got["weight"] != 2.0 {
		t.Errorf("the viewer's POST wrote: version %d, limits %v", after.Version, got)
	}
}

// TestDashKeyStaleVersion: a save from a page loaded before someone else's save
// gets 409 with a banner naming who saved, keeps what was typed, and writes nothing.
func TestDashKeyStaleVersion(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "team-a", `{"weight":1}`)
	c := d.signIn(t, "admin@example.com")
	if _, err := d.store.UpdateClientKey(t.Context(), "token:ci", k.ID, 0, func(cur store.ClientKey) (store.ClientKeyInput, error) {
		in := cur.Input()
		in.Limits = json.RawMessage(`{"weight":5}`)
		return in, nil
	}); err != nil {
		t.Fatal(err)
	}
	res := d.post(t, c, "/keys/"+k.ID, url.Values{"version": {keyVersion(k)}, "weight": {"2"}}).want(t, http.StatusConflict)
	if banner := texts(res.testid("conflict")); len(banner) != 1 || !strings.Contains(banner[0], "ci") {
		t.Errorf("conflict banner %q does not say who saved", banner)
	}
	if v := res.testid("field-weight").AttrOr("value", ""); v != "2" {
		t.Errorf("typed weight not kept: %q", v)
	}
	if got, after := d.keyLimits(t, k.ID); after.Version != k.Version+1 || got["weight"] != 5.0 {
		t.Errorf("the stale save wrote: version %d, limits %v", after.Version, got)
	}
}

// TestDashKeyNotFound: an unknown key's page is 404.
func TestDashKeyNotFound(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	d.get(t, c, "/keys/00000000-0000-4000-8000-000000000000").want(t, http.StatusNotFound)
}

// TestDashOverviewNamesWaitingKeys: the overview passes the snapshot's clients on,
// so the bottleneck gate names the keys waiting there, linked to their pages.
func TestDashOverviewNamesWaitingKeys(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "zai-main", `{"modelConcurrency":{"glm-5":1}}`)
	a := d.createKey(t, "team-a", `{}`)
	b := d.createKey(t, "team-b", `{"weight":3}`)
	d.gates.set(live.Snapshot{
		Gates: []live.Gate{
			withLoad(connGate(conn.ID), live.Gate{InFlight: 1}),
			withLoad(modelGate(conn.ID, "glm-5"), live.Gate{Cap: 1, InFlight: 1, Queued: 10, QueuedByClient: map[string]int{a.ID: 4, b.ID: 6}}),
		},
		Clients: []live.Client{{ID: a.ID, Name: "team-a", Weight: 1}, {ID: b.ID, Name: "team-b", Weight: 3}},
	})
	c := d.signIn(t, "viewer@example.com")
	res := d.get(t, c, "/").want(t, http.StatusOK)
	var got []string
	res.testid("waiting-key").Each(func(_ int, s *goquery.Selection) {
		got = append(got, strings.Join(strings.Fields(s.Text()), " ")+" "+s.Find("a").AttrOr("href", ""))
	})
	// Each key also links to its requests in the log ("requests").
	want := []string{"team-b requests 75% share · 6 queued · weight 3 /keys/" + b.ID, "team-a requests 25% share · 4 queued · weight 1 /keys/" + a.ID}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waiting keys mismatch (-want +got):\n%s", diff)
	}
}
