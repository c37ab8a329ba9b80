package web

import (
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

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
