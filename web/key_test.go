package web

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestKeysPageShowsLimitsAndLoad checks a client key's row: its name links to its
// page, its limits are summarised with units, and its live load is drawn where the
// script updates it.
func TestKeysPageShowsLimitsAndLoad(t *testing.T) {
	t.Parallel()
	items := []KeyItem{
		{ID: "k1", Name: "team-a", Preview: "gh_ck_…8e7f", Enabled: true, CreatedAt: testNow,
			Limits: limits.ClientKeyLimits{Weight: new(3), MaxConcurrent: new(8), RPM: new(60), TPD: new(int64(1000000)),
				Models: []string{"zai/*", "openai/gpt-4o", "glm-5", "glm-4.7"}},
			Live: live.Client{ID: "k1", Cap: 8, InFlight: 5, Queued: 2}},
		{ID: "k2", Name: "team-b"},
	}
	doc := render(t, KeysPage(testPage("en", RoleAdmin), KeyList{Items: items, LiveURL: "/live", LiveIntervalMs: 2000}))
	if got := byTestID(t, doc, "keys-page").AttrOr("data-live-url", ""); got != "/live" {
		t.Errorf("data-live-url = %q, want /live", got)
	}
	rows := doc.Find(`[data-testid="keys-row"]`)
	if rows.Length() != 2 {
		t.Fatalf("%d rows, want 2", rows.Length())
	}
	cell := func(row int, id string) string { return text(rows.Eq(row).Find(`[data-testid="` + id + `"]`)) }
	got := map[string]string{}
	for _, id := range []string{"key-link", "key-enabled", "key-weight", "key-maxConcurrent", "key-rpm", "key-tpm", "key-tpd", "key-models", "key-inflight", "key-queued"} {
		got[id] = cell(0, id)
	}
	want := map[string]string{
		"key-link": "team-a", "key-enabled": "✓ on", "key-weight": "3", "key-maxConcurrent": "8", "key-rpm": "60 /min",
		"key-tpm": "–", "key-tpd": "1,000,000 tokens/day", "key-models": "zai/*, openai/gpt-4o, glm-5 and 1 more",
		"key-inflight": "5 / 8", "key-queued": "2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("team-a row mismatch (-want +got):\n%s", diff)
	}
	if href := rows.Eq(0).Find(`[data-testid="key-link"]`).AttrOr("href", ""); href != "/keys/k1" {
		t.Errorf("row link %q, want /keys/k1", href)
	}
	if id := rows.Eq(0).AttrOr("data-client", ""); id != "k1" {
		t.Errorf("row data-client %q, want k1", id)
	}
	for id, want := range map[string]string{"key-weight": "1 (default)", "key-maxConcurrent": "–", "key-models": "all models", "key-inflight": "0 / –", "key-enabled": "– off"} {
		if got := cell(1, id); got != want {
			t.Errorf("team-b %s = %q, want %q", id, got, want)
		}
	}
}

func keyFormWithErrors() KeyForm {
	return KeyForm{
		ID: "k1", Name: "team-a", Preview: "gh_ck_…8e7f",
		Fields: KeyFields{Weight: "0", MaxConcurrent: "8", MaxWaitMs: "", RPM: "x", TPM: "", TPD: "", Models: "glm-5\na b", Enabled: true, Version: "4"},
		Errors: FieldErrors{"weight": {"must be a whole number from 1 to 1000"}, "rpm": {"must be a whole number from 0 to 1000000"},
			"models": {`line 2: "a b": use provider/model…`}},
		HasLive: true, Live: live.Client{ID: "k1", Cap: 8, InFlight: 3, Queued: 1},
	}
}

// TestKeyFormPage checks the limits form: every field is named by its JSON name and
// shows what was typed, each error sits beside its field (aria-invalid, described
// by), models is a textarea, and the live load is shown.
func TestKeyFormPage(t *testing.T) {
	t.Parallel()
	doc := render(t, KeyFormPage(testPage("en", RoleAdmin), keyFormWithErrors()))
	form := byTestID(t, doc, "key-form")
	if got := form.AttrOr("action", ""); got != "/keys/k1" {
		t.Errorf("form action %q, want /keys/k1", got)
	}
	for name, want := range map[string]string{"weight": "0", "maxConcurrent": "8", "maxWaitMs": "", "rpm": "x", "tpm": "", "tpd": ""} {
		in := form.Find(`input[name="` + name + `"]`)
		if in.Length() != 1 {
			t.Errorf("no input named %q", name)
			continue
		}
		if got := in.AttrOr("value", "?"); got != want {
			t.Errorf("%s value %q, want %q", name, got, want)
		}
	}
	if got := form.Find(`textarea[name="models"]`).Text(); got != "glm-5\na b" {
		t.Errorf("models textarea %q", got)
	}
	if got := form.Find(`input[name="version"]`).AttrOr("value", ""); got != "4" {
		t.Errorf("version %q, want 4", got)
	}
	if form.Find(`input[type="checkbox"][name="enabled"][checked]`).Length() != 1 {
		t.Error("enabled checkbox not checked")
	}
	for _, name := range []string{"weight", "rpm", "models"} {
		if byTestID(t, doc, "error-"+name).Length() != 1 {
			t.Errorf("no error beside %s", name)
		}
		f := byTestID(t, doc, "field-"+name)
		if f.AttrOr("aria-invalid", "") != "true" || !strings.Contains(f.AttrOr("aria-describedby", ""), "err-"+name) {
			t.Errorf("%s not marked invalid and described by its error", name)
		}
	}
	if doc.Find(`[data-testid="error-maxConcurrent"]`).Length() != 0 {
		t.Error("error shown beside a valid field")
	}
	if got := text(byTestID(t, doc, "error-summary")); !strings.Contains(got, "3 problems") || !strings.Contains(got, "Weight") {
		t.Errorf("error summary %q", got)
	}
	if got := text(byTestID(t, doc, "key-live")); !strings.Contains(got, "3 / 8 in flight") || !strings.Contains(got, "1 queued") {
		t.Errorf("live line %q", got)
	}

	viewer := keyFormWithErrors()
	viewer.ReadOnly, viewer.Errors = true, nil
	vdoc := render(t, KeyFormPage(testPage("en", RoleViewer), viewer))
	if vdoc.Find(`[data-testid="save"], [data-testid="revoke"]`).Length() != 0 {
		t.Error("viewer sees write controls")
	}
	if vdoc.Find(`[data-testid="key-form"] input:not([disabled]), [data-testid="key-form"] textarea:not([disabled])`).Length() != 0 {
		t.Error("viewer's inputs are not all disabled")
	}
	byTestID(t, vdoc, "read-only")
}

// TestOverviewWaitingKeys builds the overview from a constructed snapshot whose
// bottleneck gate splits its queue by key: the keys are named (from Clients), in
// share order, each with its share of the waiting keys' weight, its queue and a link
// to its page; requests of no key are counted apart; gates without the split draw no
// block.
func TestOverviewWaitingKeys(t *testing.T) {
	t.Parallel()
	model := live.Gate{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 1, InFlight: 1, Queued: 9,
		QueuedByClient: map[string]int{"ka": 6, "kb": 2, "": 1}, QueuedByPriority: map[string]int{"batch": 6, "interactive": 3}}
	conn := live.Gate{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, InFlight: 1, Queued: 2,
		QueuedByClient: map[string]int{"kb": 2}}
	in := OverviewInput{
		Now:   testNow,
		Gates: []live.Gate{conn, model, {Key: "connection:c2", Level: live.LevelConnection, ConnectionID: "c2", Queued: 3}},
		Connections: []ConnectionStatus{
			{Connection: live.Connection{ID: "c1", Name: "zai-main", Provider: "zai", Health: live.HealthOK}, Enabled: true},
			{Connection: live.Connection{ID: "c2", Name: "other", Provider: "zai", Health: live.HealthOK}, Enabled: true},
		},
		Clients: []live.Client{{ID: "ka", Name: "team-a", Weight: 1}, {ID: "kb", Name: "team-b", Weight: 3}},
	}
	ov := BuildOverview(in)
	want := []WaitingKey{
		{ID: "kb", Name: "team-b", Weight: 3, Queued: 2, Share: 0.6},
		{ID: "ka", Name: "team-a", Weight: 1, Queued: 6, Share: 0.2},
		{ID: "", Weight: 1, Queued: 1, Share: 0.2},
	}
	if diff := cmp.Diff(want, ov.Connections[0].Waiting); diff != "" {
		t.Errorf("waiting keys at the bottleneck mismatch (-want +got):\n%s", diff)
	}
	if ov.Connections[0].Bottleneck != model.Key {
		t.Fatalf("bottleneck %q, want the model gate", ov.Connections[0].Bottleneck)
	}
	if ov.Connections[1].Waiting != nil {
		t.Errorf("a gate without queuedByClient lists waiting keys: %+v", ov.Connections[1].Waiting)
	}

	doc := render(t, OverviewPage(testPage("en", RoleViewer), ov))
	block := byTestID(t, doc, "conn-c1").Find(`[data-testid="waiting-keys"]`)
	if got := text(block.Find(".waiting-label")); got != "Waiting at glm-5:" {
		t.Errorf("waiting label %q, want it to name the bottleneck gate", got)
	}
	var got []string
	block.Find(`[data-testid="waiting-key"]`).Each(func(_ int, s *goquery.Selection) {
		got = append(got, text(s)+" → "+s.Find("a").AttrOr("href", "-"))
	})
	wantRows := []string{
		"team-b requests 60% share · 2 queued · weight 3 → /keys/kb",
		"team-a requests 20% share · 6 queued · weight 1 → /keys/ka",
		"no key 20% share · 1 queued · weight 1 → -",
	}
	if diff := cmp.Diff(wantRows, got); diff != "" {
		t.Errorf("waiting keys block mismatch (-want +got):\n%s", diff)
	}
	// Each waiting key and each connection links to its requests in the log.
	var links []string
	block.Find(`[data-testid="waiting-requests"]`).Each(func(_ int, s *goquery.Selection) { links = append(links, s.AttrOr("href", "")) })
	if diff := cmp.Diff([]string{"/requests?key=kb", "/requests?key=ka"}, links); diff != "" {
		t.Errorf("waiting keys' request links mismatch (-want +got):\n%s", diff)
	}
	if href := byTestID(t, doc, "conn-c1").Find(`[data-testid="conn-requests"]`).AttrOr("href", ""); href != "/requests?connection=c1" {
		t.Errorf("connection's requests link %q, want /requests?connection=c1", href)
	}
	if got := text(block.Find(`[data-testid="waiting-priority"]`)); got != "3 interactive · 6 batch" {
		t.Errorf("queue by class %q, want 3 interactive · 6 batch, highest class first", got)
	}
	pt := render(t, OverviewPage(testPage("pt-BR", RoleViewer), ov))
	if got := text(byTestID(t, pt, "conn-c1").Find(`[data-testid="waiting-priority"]`)); got != "3 interativa · 6 lote" {
		t.Errorf("queue by class in Portuguese %q", got)
	}
	if n := byTestID(t, doc, "conn-c2").Find(`[data-testid="waiting-keys"]`).Length(); n != 0 {
		t.Errorf("connection without a split queue draws %d waiting blocks", n)
	}

	// A key the live view does not list yet is named by its id and weighs 1.
	in.Clients = nil
	if got := BuildOverview(in).Connections[0].Waiting[0]; got.Name != "" || got.Weight != limits.DefaultWeight {
		t.Errorf("unknown key = %+v, want no name and the default weight", got)
	}
}
