package web

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testPage(tag, role string) Page {
	p := Page{L: NewLocalizer(tag), Now: testNow, Path: "/connections/c1", CSSPath: "/static/app.12345678.css", JSPath: "/static/app.87654321.js"}
	if role != "" {
		p.User = &User{Email: "admin@localhost", Role: role}
	}
	return p
}

func render(t *testing.T, c templ.Component) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(t.Context(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatalf("parse rendered HTML: %v", err)
	}
	return doc
}

func byTestID(t *testing.T, doc *goquery.Document, id string) *goquery.Selection {
	t.Helper()
	s := doc.Find(`[data-testid="` + id + `"]`)
	if s.Length() == 0 {
		t.Fatalf("no element with data-testid=%q", id)
	}
	return s
}

func text(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

func formWithErrors() ConnectionForm {
	errs := FieldErrors{}
	errs.Add("name", "use 1 to 64 of letters, digits, dot, dash and underscore")
	errs.Add("modelConcurrency", `line 2: "glm-5=0": cap must be a whole number from 1 to 10000`)
	errs.Add("modelConcurrency", `line 3: "glm 4": write model=cap`)
	errs.AddPath("rateLimitOverrides.tpd", "must be a whole number from 0 to 10000000000")
	errs.Add("somethingElse", "unexpected")
	return ConnectionForm{
		ID:            "c1",
		APIKeyPreview: "…9f2c",
		StoredEnabled: true,
		Fields: ConnectionFields{
			Name: "zai main", Provider: "zai", APIStyle: "anthropic", BaseURL: "https://api.z.ai/api/paas/v4",
			Priority: "0", Models: "glm-5\nglm-4.7", Enabled: true, MaxConcurrent: "4",
			ModelConcurrency: "glm-4.7=3\nglm-5=0\nglm 4", TPD: "1e99", Version: "7",
		},
		Errors:   errs,
		Defaults: EffectiveDefaults{MaxWaitMs: 30000, ExecutionMaxWaitMs: 600000},
	}
}

func TestConnectionFormErrors(t *testing.T) {
	t.Parallel()
	doc := render(t, ConnectionFormPage(testPage("en", RoleAdmin), formWithErrors()))
	form := byTestID(t, doc, "connection-form")
	if got, _ := form.Attr("action"); got != "/connections/c1" {
		t.Errorf("form action = %q", got)
	}

	tests := []struct {
		name      string
		field     string
		wantError string
	}{
		{name: "name", field: "name", wantError: "use 1 to 64 of letters, digits, dot, dash and underscore"},
		{name: "textarea lists every line", field: "modelConcurrency", wantError: `line 2: "glm-5=0": cap must be a whole number from 1 to 10000 line 3: "glm 4": write model=cap`},
		{name: "api path mapped to field", field: "tpd", wantError: "must be a whole number from 0 to 10000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errEl := byTestID(t, doc, "error-"+tt.field)
			var items []string
			errEl.Find("li").Each(func(_ int, li *goquery.Selection) { items = append(items, text(li)) })
			if got := strings.Join(items, " "); got != tt.wantError {
				t.Errorf("error text = %q, want %q", got, tt.wantError)
			}
			input := byTestID(t, doc, "field-"+tt.field)
			if v, _ := input.Attr("aria-invalid"); v != "true" {
				t.Errorf("aria-invalid = %q, want true", v)
			}
			errID, _ := errEl.Attr("id")
			desc, _ := input.Attr("aria-describedby")
			if errID == "" || !strings.Contains(" "+desc+" ", " "+errID+" ") {
				t.Errorf("aria-describedby = %q does not point at error id %q", desc, errID)
			}
			// the error sits in the same row as its field
			row := byTestID(t, doc, "row-"+tt.field)
			if row.Find(`[data-testid="error-`+tt.field+`"]`).Length() != 1 {
				t.Errorf("error-%s is not inside row-%s", tt.field, tt.field)
			}
		})
	}

	lines := byTestID(t, doc, "error-modelConcurrency").Find("li")
	if lines.Length() != 2 {
		t.Errorf("modelConcurrency has %d error lines, want 2", lines.Length())
	}
	if valid := byTestID(t, doc, "field-provider"); valid.AttrOr("aria-invalid", "") != "" {
		t.Errorf("valid field carries aria-invalid")
	}
	summary := text(byTestID(t, doc, "error-summary"))
	if !strings.Contains(summary, "5 problems") || !strings.Contains(summary, "somethingElse: unexpected") {
		t.Errorf("error summary = %q, want the count and the unplaced error", summary)
	}
}

func TestConnectionFormKeepsTypedValues(t *testing.T) {
	t.Parallel()
	doc := render(t, ConnectionFormPage(testPage("en", RoleAdmin), formWithErrors()))
	tests := []struct {
		field string
		want  string
	}{
		{field: "name", want: "zai main"},
		{field: "provider", want: "zai"},
		{field: "baseUrl", want: "https://api.z.ai/api/paas/v4"},
		{field: "maxConcurrent", want: "4"},
		{field: "tpd", want: "1e99"},
	}
	for _, tt := range tests {
		if got := byTestID(t, doc, "field-"+tt.field).AttrOr("value", "<none>"); got != tt.want {
			t.Errorf("%s value = %q, want %q", tt.field, got, tt.want)
		}
	}
	if got := byTestID(t, doc, "field-modelConcurrency").Text(); got != "glm-4.7=3\nglm-5=0\nglm 4" {
		t.Errorf("textarea kept %q", got)
	}
	if got := byTestID(t, doc, "field-models").Text(); got != "glm-5\nglm-4.7" {
		t.Errorf("models kept %q", got)
	}
	if _, ok := byTestID(t, doc, "field-apiStyle-anthropic").Attr("checked"); !ok {
		t.Errorf("anthropic radio not checked")
	}
	if _, ok := byTestID(t, doc, "field-apiStyle-openai").Attr("checked"); ok {
		t.Errorf("openai radio checked")
	}
	if _, ok := byTestID(t, doc, "field-enabled").Attr("checked"); !ok {
		t.Errorf("enabled not checked")
	}
	if got := doc.Find(`input[type=hidden][name=version]`).First().AttrOr("value", ""); got != "7" {
		t.Errorf("hidden version = %q, want 7", got)
	}
	key := byTestID(t, doc, "field-apiKey")
	if key.AttrOr("type", "") != "password" || key.AttrOr("value", "") != "" {
		t.Errorf("api key input type=%q value=%q", key.AttrOr("type", ""), key.AttrOr("value", ""))
	}
	if ph := key.AttrOr("placeholder", ""); !strings.Contains(ph, "…9f2c") {
		t.Errorf("api key placeholder %q lacks the preview", ph)
	}
	if !strings.Contains(text(byTestID(t, doc, "row-apiKey")), "leave blank to keep") {
		t.Errorf("api key row lacks the keep hint")
	}
}

func TestConnectionFormFieldNamesAndLabels(t *testing.T) {
	t.Parallel()
	doc := render(t, ConnectionFormPage(testPage("en", RoleAdmin), ConnectionForm{}))
	form := byTestID(t, doc, "connection-form")
	if got := form.AttrOr("action", ""); got != "/connections/new" {
		t.Errorf("create action = %q", got)
	}
	for _, name := range append(ConnectionFieldNames(), "version") {
		if form.Find(`[name="`+name+`"]`).Length() == 0 {
			t.Errorf("no form control named %q", name)
		}
	}
	form.Find("input, textarea, select").Each(func(_ int, s *goquery.Selection) {
		typ := s.AttrOr("type", "")
		if typ == "hidden" {
			return
		}
		id := s.AttrOr("id", "")
		labelled := id != "" && doc.Find(`label[for="`+id+`"]`).Length() > 0
		if !labelled && s.ParentsFiltered("label").Length() == 0 {
			t.Errorf("control %q (id %q) has no label", s.AttrOr("name", ""), id)
		}
	})
	if _, ok := byTestID(t, doc, "field-apiKey").Attr("required"); !ok {
		t.Errorf("api key not required on create")
	}
	if doc.Find(`[data-testid="toggle"], [data-testid="delete"]`).Length() != 0 {
		t.Errorf("create form shows toggle/delete")
	}
	if got := byTestID(t, doc, "field-maxWaitMs").AttrOr("placeholder", ""); got != "default 0" {
		// zero Defaults in this form: the placeholder still names the effective value
		t.Errorf("maxWaitMs placeholder = %q", got)
	}
	ph := byTestID(t, render(t, ConnectionFormPage(testPage("en", RoleAdmin), formWithErrors())), "field-maxWaitMs").AttrOr("placeholder", "")
	if ph != "default 30000" {
		t.Errorf("maxWaitMs placeholder = %q, want %q", ph, "default 30000")
	}
}

func TestConnectionFormAdvancedOpen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		form     ConnectionForm
		wantOpen bool
	}{
		{name: "all blank", form: ConnectionForm{ID: "c1", Fields: ConnectionFields{MaxConcurrent: "4"}}, wantOpen: false},
		{name: "value", form: ConnectionForm{ID: "c1", Fields: ConnectionFields{ExecutionMaxWaitMs: "300000"}}, wantOpen: true},
		{name: "error on blank field", form: ConnectionForm{ID: "c1", Errors: FieldErrors{"minTime": {"bad"}}}, wantOpen: true},
		{name: "error elsewhere", form: ConnectionForm{ID: "c1", Errors: FieldErrors{"name": {"bad"}}}, wantOpen: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := render(t, ConnectionFormPage(testPage("en", RoleAdmin), tt.form))
			_, open := byTestID(t, doc, "advanced").Attr("open")
			if open != tt.wantOpen {
				t.Errorf("advanced open = %v, want %v", open, tt.wantOpen)
			}
		})
	}
}

func TestConnectionFormReadOnly(t *testing.T) {
	t.Parallel()
	f := formWithErrors()
	f.Errors = nil
	f.ReadOnly = true
	doc := render(t, ConnectionFormPage(testPage("en", RoleViewer), f))
	byTestID(t, doc, "read-only")
	if doc.Find(`[data-testid="save"], [data-testid="toggle"], [data-testid="delete"]`).Length() != 0 {
		t.Errorf("read-only form shows write buttons")
	}
	byTestID(t, doc, "connection-form").Find("input, textarea, select").Each(func(_ int, s *goquery.Selection) {
		if _, ok := s.Attr("disabled"); !ok {
			t.Errorf("control %q not disabled", s.AttrOr("name", ""))
		}
	})
	if got := byTestID(t, doc, "field-name").AttrOr("value", ""); got != "zai main" {
		t.Errorf("read-only value = %q", got)
	}
}

func TestConnectionFormConflictAndFooter(t *testing.T) {
	t.Parallel()
	f := formWithErrors()
	f.Errors = nil
	f.Conflict = &Conflict{By: "ops@example.com", At: testNow.Add(-2 * time.Minute), Version: 8, ReloadURL: "/connections/c1"}
	f.LastChange = &Change{By: "admin@localhost", At: testNow.Add(-3 * time.Minute), Version: 7, AuditURL: "/audit?entity=connection&id=c1"}
	doc := render(t, ConnectionFormPage(testPage("en", RoleAdmin), f))
	conflict := text(byTestID(t, doc, "conflict"))
	for _, want := range []string{"ops@example.com", "2 min ago", "version 8"} {
		if !strings.Contains(conflict, want) {
			t.Errorf("conflict %q lacks %q", conflict, want)
		}
	}
	if got := byTestID(t, doc, "conflict-reload").AttrOr("href", ""); got != "/connections/c1" {
		t.Errorf("reload href = %q", got)
	}
	// typed values survive a conflict
	if got := byTestID(t, doc, "field-name").AttrOr("value", ""); got != "zai main" {
		t.Errorf("value after conflict = %q", got)
	}
	footer := byTestID(t, doc, "last-change")
	if got, want := text(footer), "Last changed 3 min ago by admin@localhost (version 7) · view in audit log"; got != want {
		t.Errorf("footer = %q, want %q", got, want)
	}
	toggle := byTestID(t, doc, "toggle-form")
	if got := toggle.AttrOr("action", ""); got != "/connections/c1/toggle" || toggle.AttrOr("method", "") != "post" {
		t.Errorf("toggle form = %s %q", toggle.AttrOr("method", ""), got)
	}
	if got := text(byTestID(t, doc, "toggle")); got != "Disable" {
		t.Errorf("toggle label = %q", got)
	}
	if got := byTestID(t, doc, "delete").AttrOr("href", ""); got != "/connections/c1/delete" {
		t.Errorf("delete href = %q", got)
	}
}

func TestConnectionsPage(t *testing.T) {
	t.Parallel()
	list := ConnectionList{Items: []ConnectionRow{
		{ID: "c1", Name: "zai-main", Provider: "zai", APIStyle: "openai", Models: []string{"glm-5", "glm-4.7"}, MaxConcurrent: 4, ModelCaps: map[string]int{"glm-5": 1, "glm-4.7": 3}, Enabled: true, InFlight: 3, Queued: 6},
		{ID: "c2", Name: "claude", Provider: "anthropic", APIStyle: "anthropic", Models: []string{"claude-x"}, Enabled: false},
	}}
	doc := render(t, ConnectionsPage(testPage("en", RoleAdmin), list))
	rows := byTestID(t, doc, "connections-table").Find(`[data-testid="connection-row"]`)
	if rows.Length() != 2 {
		t.Fatalf("rows = %d, want 2", rows.Length())
	}
	first := rows.First()
	if got := text(first.Find(`[data-testid="caps"]`)); got != "4 · glm-4.7=3 glm-5=1" {
		t.Errorf("caps = %q", got)
	}
	if got := first.Find(`[data-testid="connection-link"]`).AttrOr("href", ""); got != "/connections/c1" {
		t.Errorf("edit link = %q", got)
	}
	for _, want := range []string{"zai-main", "zai", "OpenAI", "glm-5, glm-4.7", "on", "3", "6"} {
		if !strings.Contains(text(first), want) {
			t.Errorf("row %q lacks %q", text(first), want)
		}
	}
	if got := text(rows.Eq(1).Find(`[data-testid="caps"]`)); got != "–" {
		t.Errorf("uncapped caps = %q", got)
	}
	byTestID(t, doc, "new-connection")

	viewer := render(t, ConnectionsPage(testPage("en", RoleViewer), list))
	if viewer.Find(`[data-testid="new-connection"]`).Length() != 0 {
		t.Errorf("viewer sees the new-connection button")
	}
	empty := render(t, ConnectionsPage(testPage("en", RoleAdmin), ConnectionList{}))
	if got := text(byTestID(t, empty, "empty")); !strings.Contains(got, "gatehouse serve --demo") {
		t.Errorf("empty state = %q", got)
	}
}

func sampleOverview() Overview {
	// A minute ago connection c1 had admitted 10 requests at once; since, 96 more
	// waited (256 ms, 512 ms] and 4 waited (1.024 s, 2.048 s]: p50 is rank 50 of
	// 100, 256 ms + 256 ms × 50/96 ≈ 389 ms; p99 is rank 99, the third of the
	// four slow ones, 1.024 s + 1.024 s × 3/4 = 1.792 s.
	return BuildOverview(OverviewInput{
		Now: testNow,
		History: []GateSnapshot{{At: testNow.Add(-time.Minute), Gates: []live.Gate{
			{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, Admitted: 10, Waits: live.WaitHistogram{0: 10}},
		}}},
		Gates: []live.Gate{
			{Key: "global", Level: live.LevelGlobal, Cap: 200, InFlight: 142},
			{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Cap: 4, InFlight: 3, Queued: 0,
				Admitted: 110, Waits: live.WaitHistogram{0: 10, 10: 96, 12: 4}},
			{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-5", Cap: 1, InFlight: 1, Queued: 6},
			{Key: "model:c1:glm-4.7", Level: live.LevelModel, ConnectionID: "c1", Model: "glm-4.7", Cap: 3, InFlight: 2},
			{Key: "connection:c2", Level: live.LevelConnection, ConnectionID: "c2", Cap: 0, InFlight: 0},
		},
		Connections: []ConnectionStatus{
			{Connection: live.Connection{ID: "c1", Name: "zai-main", Provider: "zai", Health: live.HealthOK,
				Budgets: map[string]live.Budget{live.BudgetRPM: {Limit: 60, Remaining: 58, ResetAt: testNow.Add(40 * time.Second)}}}, Enabled: true},
			{Connection: live.Connection{ID: "c2", Name: "openai-team", Provider: "openai", Health: live.HealthCooling, Until: testNow.Add(12 * time.Second), Reason: "429 from upstream"}, Enabled: true},
		},
		LiveURL: "/live",
	})
}

func TestOverviewPage(t *testing.T) {
	t.Parallel()
	doc := render(t, OverviewPage(testPage("en", RoleAdmin), sampleOverview()))
	ov := byTestID(t, doc, "overview")
	if got := ov.AttrOr("data-live-url", ""); got != "/live" {
		t.Errorf("data-live-url = %q", got)
	}
	summary := text(byTestID(t, doc, "summary"))
	if want := "Right now 3 in flight · 6 queued · 0 rejected in the last minute · p99 wait 1.8 s"; summary != want {
		t.Errorf("summary = %q, want %q", summary, want)
	}
	tests := []struct {
		key        string
		wantRatio  string
		wantQueued string
		wantState  string
		bottleneck bool
	}{
		{key: "global", wantRatio: "142 / 200", wantQueued: "0", wantState: "idle"},
		{key: "connection:c1", wantRatio: "3 / 4", wantQueued: "0", wantState: "idle"},
		{key: "model:c1:glm-5", wantRatio: "1 / 1", wantQueued: "6", wantState: "queueing", bottleneck: true},
		{key: "model:c1:glm-4.7", wantRatio: "2 / 3", wantQueued: "0", wantState: "idle"},
		{key: "connection:c2", wantRatio: "0 / –", wantQueued: "0", wantState: "idle"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			row := byTestID(t, doc, "gate-"+tt.key)
			if got := row.AttrOr("data-gate", ""); got != tt.key {
				t.Errorf("data-gate = %q", got)
			}
			if got := text(row.Find(`[data-testid="ratio"]`)); got != tt.wantRatio {
				t.Errorf("ratio = %q, want %q", got, tt.wantRatio)
			}
			if got := text(row.Find(`[data-testid="queued"]`)); got != tt.wantQueued {
				t.Errorf("queued = %q, want %q", got, tt.wantQueued)
			}
			// colour never alone: the state is written in words
			if got := text(row.Find(`[data-testid="state"]`)); !strings.Contains(got, tt.wantState) {
				t.Errorf("state = %q, want %q", got, tt.wantState)
			}
			visible := row.Find(`[data-testid="bottleneck"]:not([hidden])`).Length() == 1
			if visible != tt.bottleneck {
				t.Errorf("bottleneck mark shown = %v, want %v", visible, tt.bottleneck)
			}
			if row.Find(`svg[data-testid="spark"] polyline`).Length() != 2 {
				t.Errorf("sparkline missing")
			}
		})
	}
	// the connection gate carries its wait percentiles, as UX.md draws them; a gate
	// with no admission in the window, and the model gates, carry none
	if got := text(byTestID(t, doc, "gate-connection:c1").Find(`[data-testid="wait"]`)); got != "wait p50 0.4 s p99 1.8 s" {
		t.Errorf("connection:c1 wait = %q, want %q", got, "wait p50 0.4 s p99 1.8 s")
	}
	for _, key := range []string{"connection:c2", "model:c1:glm-5", "global"} {
		if n := byTestID(t, doc, "gate-"+key).Find(`[data-testid="wait"]`).Length(); n != 0 {
			t.Errorf("%s shows a wait line with no admission in the window", key)
		}
	}
	if got := byTestID(t, doc, "gate-connection:c1").Find(`[data-f="fill"]`).AttrOr("style", ""); got != "width:75%;" {
		t.Errorf("bar style = %q, want width:75%%;", got)
	}
	c2 := byTestID(t, doc, "conn-c2")
	if got := text(c2.Find(`[data-testid="health"]`)); got != "◐ cooling 12 s (429 from upstream)" {
		t.Errorf("health = %q", got)
	}
	if got := text(byTestID(t, doc, "budget-rpm")); got != "requests/min 58 of 60 left resets in 40 s" {
		t.Errorf("budget = %q", got)
	}
	// the global gate is drawn once, above the connections
	if n := doc.Find(`[data-gate="global"]`).Length(); n != 1 {
		t.Errorf("global gate drawn %d times", n)
	}
}

func TestOverviewEmpty(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		role     string
		wantLink bool
	}{
		{name: "admin", role: RoleAdmin, wantLink: true},
		{name: "viewer", role: RoleViewer, wantLink: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := render(t, OverviewPage(testPage("en", tt.role), Overview{}))
			empty := byTestID(t, doc, "empty")
			if got := text(empty); !strings.Contains(got, "No connections yet") || !strings.Contains(got, "gatehouse serve --demo") {
				t.Errorf("empty state = %q", got)
			}
			if got := empty.Find(`a[href="/connections/new"]`).Length() == 1; got != tt.wantLink {
				t.Errorf("add link shown = %v, want %v", got, tt.wantLink)
			}
			if _, live := byTestID(t, doc, "overview").Attr("data-live-url"); live {
				t.Errorf("live refresh on without a LiveURL")
			}
		})
	}
}

func TestLayout(t *testing.T) {
	t.Parallel()
	// Viewers read every page, the user list included: both roles get every link.
	tests := []struct {
		name string
		role string
	}{
		{name: "admin", role: RoleAdmin},
		{name: "viewer", role: RoleViewer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := testPage("en", tt.role)
			p.Flashes = []Flash{{Kind: FlashSuccess, Message: "Saved zai-main: glm-5 cap 1 → 2"}}
			doc := render(t, ConnectionsPage(p, ConnectionList{}))
			nav := byTestID(t, doc, "nav")
			for _, n := range []string{NavOverview, NavConnections, NavSettings, NavKeys, NavTokens, NavAudit, NavUsers} {
				if nav.Find(`[data-testid="nav-`+n+`"]`).Length() != 1 {
					t.Errorf("nav lacks %s", n)
				}
			}
			if got := nav.Find(`[aria-current="page"]`).AttrOr("data-testid", ""); got != "nav-connections" {
				t.Errorf("current nav = %q", got)
			}
			if got := text(byTestID(t, doc, "flash")); got != "✓ Saved zai-main: glm-5 cap 1 → 2" {
				t.Errorf("flash = %q", got)
			}
			logout := byTestID(t, doc, "logout").Closest("form")
			if logout.AttrOr("action", "") != "/logout" || logout.AttrOr("method", "") != "post" {
				t.Errorf("sign-out form = %s %s", logout.AttrOr("method", ""), logout.AttrOr("action", ""))
			}
			if got := text(byTestID(t, doc, "role")); got != tt.role {
				t.Errorf("role = %q", got)
			}
			if got := doc.Find(`link[rel=stylesheet]`).AttrOr("href", ""); got != "/static/app.12345678.css" {
				t.Errorf("css href = %q", got)
			}
			if got := doc.Find(`script[src]`).AttrOr("src", ""); got != "/static/app.87654321.js" {
				t.Errorf("js src = %q", got)
			}
			if got := byTestID(t, doc, "lang").Find(`a[hreflang="pt-BR"]`).AttrOr("href", ""); got != "/connections/c1?lang=pt-BR" {
				t.Errorf("language link = %q", got)
			}
			if got := doc.Find("html").AttrOr("lang", ""); got != "en" {
				t.Errorf("html lang = %q", got)
			}
		})
	}
}

func TestPortugueseRendering(t *testing.T) {
	t.Parallel()
	doc := render(t, OverviewPage(testPage("pt-BR", RoleAdmin), sampleOverview()))
	if got := doc.Find("html").AttrOr("lang", ""); got != "pt-BR" {
		t.Errorf("html lang = %q", got)
	}
	if got := text(byTestID(t, doc, "nav-connections")); got != "Conexões" {
		t.Errorf("nav = %q, want Conexões", got)
	}
	if got := text(byTestID(t, doc, "summary")); !strings.Contains(got, "em andamento") || !strings.Contains(got, "1,8 s") {
		t.Errorf("summary = %q, want Portuguese words and decimal comma", got)
	}
	if got := text(byTestID(t, doc, "gate-connection:c1").Find(`[data-testid="wait"]`)); got != "espera p50 0,4 s p99 1,8 s" {
		t.Errorf("connection wait = %q, want %q", got, "espera p50 0,4 s p99 1,8 s")
	}
	form := render(t, ConnectionFormPage(testPage("pt-BR", RoleAdmin), formWithErrors()))
	if got := text(byTestID(t, form, "save")); got != "Salvar alterações" {
		t.Errorf("save = %q", got)
	}
}

func TestLoginPage(t *testing.T) {
	t.Parallel()
	doc := render(t, LoginPage(testPage("en", ""), LoginForm{Email: "a@b.c", Error: NewLocalizer("en").T("login.failed")}))
	form := byTestID(t, doc, "login-form")
	if form.AttrOr("action", "") != "/login" || form.AttrOr("method", "") != "post" {
		t.Errorf("login form = %s %s", form.AttrOr("method", ""), form.AttrOr("action", ""))
	}
	if got := text(byTestID(t, doc, "login-error")); got != "That email and password do not match." {
		t.Errorf("login error = %q", got)
	}
	if got := byTestID(t, doc, "field-email").AttrOr("value", ""); got != "a@b.c" {
		t.Errorf("email kept = %q", got)
	}
	if doc.Find(`[data-testid="nav"], [data-testid="logout"]`).Length() != 0 {
		t.Errorf("signed-out page shows nav or sign-out")
	}

	throttled := render(t, LoginPage(testPage("en", ""), LoginForm{Throttled: true, RetryAfterSeconds: 30}))
	if got := text(byTestID(t, throttled, "login-throttled")); got != "Too many attempts — try later. Try again in 30 seconds." {
		t.Errorf("throttled = %q", got)
	}
	if throttled.Find(`[data-testid="login-error"]`).Length() != 0 {
		t.Errorf("throttled page also shows the wrong-password error")
	}
}

// TestNoPreview: a secret too short for a preview (store gives "") reads as "no
// preview", in the key list and on a connection's key field.
func TestNoPreview(t *testing.T) {
	t.Parallel()
	items := []KeyItem{{ID: "k1", Name: "short", Role: RoleAdmin, CreatedAt: testNow}}
	doc := render(t, TokensPage(testPage("en", RoleAdmin), KeyList{Items: items}))
	if got := text(byTestID(t, doc, "no-preview")); got != "no preview (too short to show any of it)" {
		t.Errorf("empty preview shows %q", got)
	}
	conn := render(t, ConnectionFormPage(testPage("en", RoleAdmin), ConnectionForm{ID: "c1"}))
	if got := byTestID(t, conn, "field-apiKey").AttrOr("placeholder", ""); got != "a key is stored (too short for a preview)" {
		t.Errorf("apiKey placeholder without a preview = %q", got)
	}
}

func TestKeysAndTokensPages(t *testing.T) {
	t.Parallel()
	items := []KeyItem{{ID: "k1", Name: "agent-1", Preview: "gh_…8e7f", Role: RoleViewer, CreatedAt: testNow.Add(-time.Hour)}}
	doc := render(t, KeysPage(testPage("en", RoleAdmin), KeyList{Items: items, Created: &CreatedSecret{Name: "agent-1", Secret: "s3cr3t-value-123456"}}))
	if got := text(byTestID(t, doc, "new-secret")); got != "s3cr3t-value-123456" {
		t.Errorf("new secret = %q", got)
	}
	if got := byTestID(t, doc, "revoke").AttrOr("href", ""); got != "/keys/k1/revoke" {
		t.Errorf("revoke href = %q", got)
	}
	if got := byTestID(t, doc, "keys-form").AttrOr("action", ""); got != "/keys" {
		t.Errorf("create action = %q", got)
	}
	if got := text(byTestID(t, doc, "keys-row")); !strings.Contains(got, "never") {
		t.Errorf("row = %q, want never used", got)
	}

	tok := render(t, TokensPage(testPage("en", RoleAdmin), KeyList{Items: items, Errors: FieldErrors{"name": {"required"}}}))
	if tok.Find(`[data-testid="new-secret"]`).Length() != 0 {
		t.Errorf("secret shown without Created")
	}
	if got := byTestID(t, tok, "field-role").Find("option[selected]").AttrOr("value", ""); got != RoleViewer {
		t.Errorf("default role = %q", got)
	}
	if got := text(byTestID(t, tok, "error-name")); got != "required" {
		t.Errorf("name error = %q", got)
	}
	if got := byTestID(t, tok, "revoke").AttrOr("href", ""); got != "/tokens/k1/revoke" {
		t.Errorf("token revoke href = %q", got)
	}

	viewer := render(t, KeysPage(testPage("en", RoleViewer), KeyList{Items: items}))
	if viewer.Find(`[data-testid="keys-form"], [data-testid="revoke"]`).Length() != 0 {
		t.Errorf("viewer sees write controls")
	}
}

func TestSettingsPage(t *testing.T) {
	t.Parallel()
	l := NewLocalizer("en")
	_, lineErrs := limits.ParseProviderCaps("zai 8\nopenai x")
	errs := FieldErrors{}
	for _, e := range lineErrs {
		errs.Add("providers", LineErrorMessage(l, e))
	}
	errs.Add("maxAttempts", "must be a whole number from 1 to 10")
	doc := render(t, SettingsPage(testPage("en", RoleAdmin), SettingsForm{Fields: SettingsFields{Providers: "zai 8\nopenai x", MaxAttempts: "0"}, Errors: errs}))
	form := byTestID(t, doc, "settings-form")
	for _, name := range append(SettingsFieldNames(), "version") {
		if form.Find(`[name="`+name+`"]`).Length() == 0 {
			t.Errorf("no control named %q", name)
		}
	}
	if got := text(byTestID(t, doc, "error-providers")); got != `line 2: "openai x": maxConcurrent must be a whole number from 0 to 100000` {
		t.Errorf("providers error = %q", got)
	}
	if got := byTestID(t, doc, "field-maxAttempts").AttrOr("aria-invalid", ""); got != "true" {
		t.Errorf("maxAttempts aria-invalid = %q", got)
	}
	if got := byTestID(t, doc, "field-defaultMaxWaitMs").AttrOr("placeholder", ""); got != "default 30000" {
		t.Errorf("placeholder = %q", got)
	}
	ro := render(t, SettingsPage(testPage("en", RoleViewer), SettingsForm{ReadOnly: true}))
	if ro.Find(`[data-testid="save"]`).Length() != 0 {
		t.Errorf("read-only settings has a save button")
	}
}

func TestAuditPage(t *testing.T) {
	t.Parallel()
	entries := []AuditEntry{{
		At: testNow.Add(-3 * time.Minute), Actor: "admin@localhost", Action: "update", Entity: "connection", EntityName: "zai-main",
		Diff: DiffJSON([]byte(`{"rateLimitOverrides":{"modelConcurrency":{"glm-5":1}}}`), []byte(`{"rateLimitOverrides":{"modelConcurrency":{"glm-5":2}}}`)),
	}, {
		At: testNow, Actor: "x", Action: "brand-new-action", Entity: "thing",
	}}
	doc := render(t, AuditPage(testPage("en", RoleAdmin), AuditList{Entries: entries, OlderURL: "/audit?before=abc"}))
	line := byTestID(t, doc, "diff-line")
	if got := text(line.Find(".diff-path").Parent()); !strings.Contains(got, "modelConcurrency.glm-5: 1 → 2") {
		t.Errorf("diff line = %q", got)
	}
	if got := byTestID(t, doc, "older").AttrOr("href", ""); got != "/audit?before=abc" {
		t.Errorf("older = %q", got)
	}
	if got := text(doc.Find(`[data-testid="audit-entry"]`).Eq(1)); !strings.Contains(got, "brand-new-action") {
		t.Errorf("unknown action not shown as is: %q", got)
	}
}

func TestUsersPage(t *testing.T) {
	t.Parallel()
	doc := render(t, UsersPage(testPage("en", RoleAdmin), UserList{
		Items:  []UserItem{{ID: "u1", Email: "admin@localhost", Role: RoleAdmin, Self: true}, {ID: "u2", Email: "ops@example.com", Role: RoleViewer}},
		Email:  "new@example.com",
		Errors: FieldErrors{"password": {"use at least 12 characters"}},
	}))
	rows := doc.Find(`[data-testid="user-row"]`)
	if rows.Length() != 2 {
		t.Fatalf("rows = %d", rows.Length())
	}
	if rows.Eq(0).Find(`[data-testid="remove"], [data-testid="role-form"]`).Length() != 0 {
		t.Errorf("self row can be removed or demoted")
	}
	if got := rows.Eq(1).Find(`[data-testid="role-form"]`).AttrOr("action", ""); got != "/users/u2/role" {
		t.Errorf("role form action = %q", got)
	}
	if got := byTestID(t, doc, "field-email").AttrOr("value", ""); got != "new@example.com" {
		t.Errorf("email kept = %q", got)
	}
	if got := byTestID(t, doc, "field-password").AttrOr("value", ""); got != "" {
		t.Errorf("password re-rendered: %q", got)
	}
	byTestID(t, doc, "error-password")
}

func TestConfirmAndErrorPages(t *testing.T) {
	t.Parallel()
	l := NewLocalizer("en")
	doc := render(t, ConfirmDeletePage(testPage("en", RoleAdmin), ConfirmDelete{
		Title: l.T("confirm.connection.title", "zai-main"), Message: l.T("confirm.connection.body"),
		Action: "/connections/c1/delete", CancelURL: "/connections/c1", Version: "7",
	}))
	form := byTestID(t, doc, "confirm-form")
	if form.AttrOr("method", "") != "post" || form.AttrOr("action", "") != "/connections/c1/delete" {
		t.Errorf("confirm form = %s %s", form.AttrOr("method", ""), form.AttrOr("action", ""))
	}
	if got := form.Find(`input[name=version]`).AttrOr("value", ""); got != "7" {
		t.Errorf("version = %q", got)
	}
	if got := text(byTestID(t, doc, "confirm-button")); got != "Delete" {
		t.Errorf("button = %q", got)
	}
	if got := doc.Find("h1").Text(); got != "Delete connection zai-main?" {
		t.Errorf("title = %q", got)
	}

	e := render(t, ErrorPage(testPage("pt-BR", RoleViewer), 403, "x"))
	if got := text(e.Find("h1")); got != "403 Não permitido" {
		t.Errorf("error heading = %q", got)
	}
	unknown := render(t, ErrorPage(testPage("en", ""), 418, ""))
	if got := text(unknown.Find("h1")); got != "418 Error" {
		t.Errorf("unknown status heading = %q", got)
	}
}

// allPages renders every page with rich data, for checks that apply to all of them.
func allPages(tag string) map[string]templ.Component {
	p := testPage(tag, RoleAdmin)
	p.Flashes = []Flash{{Kind: FlashInfo, Message: "m"}}
	l := p.L
	f := formWithErrors()
	f.Conflict = &Conflict{By: "a", At: testNow, Version: 2, ReloadURL: "/x"}
	f.LastChange = &Change{By: "a", At: testNow, Version: 1, AuditURL: "/audit"}
	f.Warnings = []string{"w"}
	keys := KeyList{Items: []KeyItem{{ID: "k", Name: "n", Preview: "p", Role: RoleAdmin, CreatedAt: testNow, LastUsedAt: testNow}}, Created: &CreatedSecret{Name: "n", Secret: "s"}, Errors: FieldErrors{"x": {"y"}}}
	ov := sampleOverview()
	ov.Connections[0].Waiting = []WaitingKey{{ID: "k", Name: "n", Weight: 3, Queued: 2, Share: 0.75}, {Weight: 1, Queued: 1, Share: 0.25}}
	ov.GlobalWaiting = ov.Connections[0].Waiting
	kf := keyFormWithErrors()
	kf.Conflict, kf.LastChange, kf.Warnings = f.Conflict, f.LastChange, []string{"w"}
	ov.Connections = append(ov.Connections, ConnectionBlock{ConnectionStatus: ConnectionStatus{Connection: live.Connection{ID: "c9", Name: "n", Health: live.HealthBreakerOpen, Budgets: map[string]live.Budget{live.BudgetTPD: {Limit: 1, Remaining: 0, ResetAt: testNow.Add(time.Hour)}}}}})
	return map[string]templ.Component{
		"overview":    OverviewPage(p, ov),
		"empty":       OverviewPage(p, Overview{}),
		"connections": ConnectionsPage(p, ConnectionList{Items: []ConnectionRow{{ID: "c", Name: "n", APIStyle: "openai", Enabled: true}, {ID: "d", APIStyle: "anthropic"}}}),
		"form":        ConnectionFormPage(p, f),
		"form-new":    ConnectionFormPage(p, ConnectionForm{}),
		"read-only":   ConnectionFormPage(testPage(tag, RoleViewer), ConnectionForm{ID: "c", ReadOnly: true}),
		"settings":    SettingsPage(p, SettingsForm{Errors: FieldErrors{"providers": {"x"}}, Conflict: &Conflict{By: "a", At: testNow}, LastChange: &Change{By: "a", At: testNow}}),
		"keys":        KeysPage(p, keys),
		"key-form":    KeyFormPage(p, kf),
		"key-unseen":  KeyFormPage(p, KeyForm{ID: "k", Name: "n"}),
		"key-limits":  KeysPage(p, KeyList{Items: []KeyItem{{ID: "k", Name: "n", Limits: limits.ClientKeyLimits{Models: []string{"a", "b", "c", "d"}}}}}),
		"tokens":      TokensPage(p, keys),
		"audit":       AuditPage(p, AuditList{Entries: []AuditEntry{{Action: "update", Entity: "connection", Diff: []DiffLine{{Path: "a", Op: DiffAdded, After: "1"}, {Path: "b", Op: DiffRemoved, Before: "1"}, {Path: "c", Op: DiffChanged, Before: "1", After: "2"}}}}, OlderURL: "/o", NewestURL: "/n"}),
		"users":       UsersPage(p, UserList{Items: []UserItem{{ID: "u", Email: "e", Role: RoleAdmin}, {ID: "v", Email: "f", Role: RoleViewer}}, ResetID: "v", ResetErrors: []string{"x"}}),
		"account":     AccountPage(p, AccountForm{Email: "e", Errors: FieldErrors{"currentPassword": {"x"}, "other": {"y"}}}),
		"logout":      LogoutPage(p),
		"login":       LoginPage(testPage(tag, ""), LoginForm{Error: "e", Next: "/x"}),
		"throttled":   LoginPage(testPage(tag, ""), LoginForm{Throttled: true, RetryAfterSeconds: 1}),
		"confirm":     ConfirmDeletePage(p, ConfirmDelete{Title: l.T("confirm.key.title", "k"), Message: l.T("confirm.key.body"), Action: "/a", CancelURL: "/c"}),
		"error":       ErrorPage(p, 404, l.T("error.notFound")),
	}
}

// keyLike matches text that is a catalog key rendered raw, e.g. "state.idle".
var keyLike = regexp.MustCompile(`\b[a-z][a-zA-Z]*\.[a-z][a-zA-Z0-9-]*(\.[a-zA-Z0-9-]+)*\b`)

func TestNoRawKeysRendered(t *testing.T) {
	t.Parallel()
	for _, tag := range Locales() {
		for name, c := range allPages(tag) {
			t.Run(tag+"/"+name, func(t *testing.T) {
				t.Parallel()
				doc := render(t, c)
				doc.Find("script, style").Remove()
				body := text(doc.Find("body"))
				for _, m := range keyLike.FindAllString(body, -1) {
					if NewLocalizer("en").HasKey(m) || strings.HasPrefix(m, "audit.") || strings.Contains(m, "state.") || strings.Contains(m, "health.") {
						t.Errorf("raw catalog key %q rendered", m)
					}
				}
				if strings.Contains(body, "%!") {
					t.Errorf("bad format verb in %q", body)
				}
			})
		}
	}
}
