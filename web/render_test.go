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
	if got := text(byTestID(t, doc, "gate-connection:c1").Find(`[data-testid="wait"]`)); got != "espera p50 0,4 s p99 1,8 s no último minuto" {
		t.Errorf("connection wait = %q, want %q", got, "espera p50 0,4 s p99 1,8 s no último minuto")
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
	if got := text(line.Find(".diff-path").Parent()); !strings.Contains(got, "modelConcurrency › glm-5: 1 → 2") || strings.Contains(got, "rateLimitOverrides") {
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

// TestNothingInline (issue 24, finding 10): no page carries what the dashboard's CSP
// (script-src 'self'; style-src 'self') refuses — a style attribute or element, an
// inline script, an event-handler attribute, a javascript: URL —, so every page works
// under it and the browser logs no violation.
func TestNothingInline(t *testing.T) {
	t.Parallel()
	for name, c := range allPages("en") {
		doc := render(t, c)
		if n := doc.Find("[style], style").Length(); n > 0 {
			h, _ := doc.Find("[style], style").First().Parent().Html()
			t.Errorf("%s: %d style attributes or elements, first in %s", name, n, h)
		}
		doc.Find("script").Each(func(_ int, s *goquery.Selection) {
			if src, ok := s.Attr("src"); !ok || src == "" || strings.TrimSpace(s.Text()) != "" {
				t.Errorf("%s: an inline script", name)
			}
		})
		doc.Find("*").Each(func(_ int, s *goquery.Selection) {
			for _, a := range s.Nodes[0].Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") || strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:") {
					t.Errorf("%s: <%s %s=%q>", name, s.Nodes[0].Data, a.Key, a.Val)
				}
			}
		})
	}
}
