package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
)

func TestDashViewerReadOnly(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "zai-main", `{"maxConcurrent":4}`)
	c := d.signIn(t, "viewer@example.com")

	res := d.get(t, c, "/connections/"+conn.ID).want(t, http.StatusOK)
	if res.testid("read-only").Length() != 1 {
		t.Error("no read-only banner for a viewer")
	}
	if res.testid("save").Length() != 0 || res.testid("toggle").Length() != 0 {
		t.Error("a viewer sees save or toggle buttons")
	}
	for _, f := range []string{"name", "baseUrl", "maxConcurrent", "modelConcurrency", "executionMaxWaitMs"} {
		if _, disabled := res.testid("field-" + f).Attr("disabled"); !disabled {
			t.Errorf("field %s is not disabled for a viewer", f)
		}
	}

	forged := url.Values{"version": {strconv.FormatInt(conn.Version, 10)}, "name": {"hijacked"}}
	for _, p := range []string{"/connections/" + conn.ID, "/connections/" + conn.ID + "/toggle",
		"/connections/" + conn.ID + "/delete", "/connections/new", "/settings", "/keys", "/tokens", "/users"} {
		d.post(t, c, p, forged).want(t, http.StatusForbidden)
	}
	if got, _ := d.store.GetConnection(t.Context(), conn.ID); got.Name != "zai-main" || got.Version != conn.Version {
		t.Errorf("a viewer's POST changed the connection: %+v", got)
	}
}

func TestDashCrossSitePost(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	conn := d.createConnection(t, "zai-main", `{}`)
	c := d.signIn(t, "admin@example.com")
	form := url.Values{"version": {strconv.FormatInt(conn.Version, 10)}}
	tests := []struct {
		name    string
		headers []string
	}{
		{"foreign Origin", []string{"Origin", "http://evil.example"}},
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d.post(t, c, "/connections/"+conn.ID+"/toggle", form, tt.headers...).want(t, http.StatusForbidden)
		})
	}
	if got, _ := d.store.GetConnection(t.Context(), conn.ID); !got.Enabled || got.Version != conn.Version {
		t.Errorf("a cross-site POST changed the connection: enabled %v version %d", got.Enabled, got.Version)
	}
	// The same POST from the site itself goes through.
	d.post(t, c, "/connections/"+conn.ID+"/toggle", form, "Sec-Fetch-Site", "same-origin").want(t, http.StatusSeeOther)
}

func TestDashSettings(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	page := d.get(t, c, "/settings").want(t, http.StatusOK)
	form := formValues(page.testid("settings-form"))
	form.Set("globalMaxConcurrent", "100")
	form.Set("providers", "zai 4 20000\nopenai 0")
	d.post(t, c, "/settings", form).want(t, http.StatusSeeOther)
	got := d.settings(t)
	want := map[string]any{"globalMaxConcurrent": 100.0, "providers": map[string]any{
		"zai": map[string]any{"maxConcurrent": 4.0, "maxWaitMs": 20000.0}, "openai": map[string]any{"maxConcurrent": 0.0}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored settings mismatch (-want +got):\n%s", diff)
	}

	form = formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	form.Set("maxAttempts", "99")
	form.Set("providers", "zai 4\nZAI x")
	res := d.post(t, c, "/settings", form).want(t, http.StatusUnprocessableEntity)
	if got := texts(res.testid("error-maxAttempts").Find("li")); len(got) != 1 || got[0] != "must be a whole number from 1 to 10" {
		t.Errorf("maxAttempts errors %q", got)
	}
	if got := texts(res.testid("error-providers").Find("li")); len(got) != 1 || !strings.HasPrefix(got[0], `line 2: "ZAI x"`) {
		t.Errorf("providers errors %q", got)
	}
}

// TestDashSettingsWithoutVersion posts only the field a script changes, with no
// version: the write is unconditional (like the API without If-Match) and other keys
// stay as they were.
func TestDashSettingsWithoutVersion(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	d.post(t, c, "/settings", url.Values{"globalMaxConcurrent": {"7"}}).want(t, http.StatusSeeOther)
	d.post(t, c, "/settings", url.Values{"defaultMaxWaitMs": {"45000"}}).want(t, http.StatusSeeOther)
	got := d.settings(t)
	want := map[string]any{"globalMaxConcurrent": 7.0, "defaultMaxWaitMs": 45000.0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored settings mismatch (-want +got):\n%s", diff)
	}
	d.post(t, c, "/settings", url.Values{"version": {"x"}, "defaultMaxWaitMs": {"1"}}).want(t, http.StatusBadRequest)
}

func TestDashKeysAndTokens(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	res := d.post(t, c, "/keys", url.Values{"name": {"agent-1"}}).want(t, http.StatusCreated)
	secret := strings.TrimSpace(res.testid("new-secret").Text())
	if !strings.HasPrefix(secret, store.ClientKeyPrefix) {
		t.Fatalf("new secret %q", secret)
	}
	if _, err := d.store.LookupClientKey(t.Context(), secret); err != nil {
		t.Errorf("the shown secret does not work: %v", err)
	}
	list := d.get(t, c, "/keys").want(t, http.StatusOK)
	if strings.Contains(list.body, secret) {
		t.Error("the list shows the secret again")
	}
	revoke, _ := list.testid("revoke").Attr("href")
	confirm := d.get(t, c, revoke).want(t, http.StatusOK)
	action, _ := confirm.testid("confirm-form").Attr("action")
	d.post(t, c, action, nil).want(t, http.StatusSeeOther)
	if _, err := d.store.LookupClientKey(t.Context(), secret); err == nil {
		t.Error("a revoked key still works")
	}

	res = d.post(t, c, "/tokens", url.Values{"name": {""}, "role": {"root"}}).want(t, http.StatusUnprocessableEntity)
	if res.testid("error-name").Length() != 1 || res.testid("error-role").Length() != 1 {
		t.Errorf("token form errors missing:\n%s", res.body)
	}
	res = d.post(t, c, "/tokens", url.Values{"name": {"ci"}, "role": {"viewer"}}).want(t, http.StatusCreated)
	if tok, err := d.store.LookupAPIToken(t.Context(), strings.TrimSpace(res.testid("new-secret").Text())); err != nil || tok.Role != "viewer" {
		t.Errorf("token: %+v %v", tok, err)
	}
}

func TestDashUsersAndAudit(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	res := d.post(t, c, "/users", url.Values{"email": {"x"}, "password": {"short"}, "role": {"admin"}})
	res.want(t, http.StatusUnprocessableEntity)
	if res.testid("error-email").Length() != 1 || res.testid("error-password").Length() != 1 {
		t.Errorf("user form errors missing:\n%s", res.body)
	}
	d.post(t, c, "/users", url.Values{"email": {"ops@example.com"}, "password": {"a long enough password"}, "role": {"viewer"}}).
		want(t, http.StatusSeeOther)
	if _, err := d.store.Authenticate(t.Context(), "ops@example.com", "a long enough password"); err != nil {
		t.Errorf("new user cannot sign in: %v", err)
	}
	// An admin cannot demote themselves here.
	d.post(t, c, "/users/"+d.admin.ID+"/role", url.Values{"role": {"viewer"}}).want(t, http.StatusSeeOther)
	if u, _ := d.store.GetUser(t.Context(), d.admin.ID); u.Role != store.RoleAdmin {
		t.Error("an admin demoted themselves")
	}

	conn := d.createConnection(t, "zai-main", `{"modelConcurrency":{"glm-5":1}}`)
	form := formValues(d.get(t, c, "/connections/"+conn.ID).testid("connection-form"))
	form.Set("modelConcurrency", "glm-5=2")
	d.post(t, c, "/connections/"+conn.ID, form).want(t, http.StatusSeeOther)
	audit := d.get(t, c, "/audit").want(t, http.StatusOK)
	diff := texts(audit.testid("diff-line"))
	found := false
	for _, line := range diff {
		if strings.Contains(line, "glm-5") && strings.Contains(line, "1") && strings.Contains(line, "2") {
			found = true
		}
	}
	if !found {
		t.Errorf("audit diff lines %q lack the glm-5 change", diff)
	}
}

func TestDashLanguage(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.client(t)
	res := d.get(t, c, "/login?lang=pt-BR").want(t, http.StatusOK)
	if got := strings.TrimSpace(res.testid("login-submit").Text()); got != "Entrar" {
		t.Errorf("pt-BR sign-in button %q", got)
	}
	res = d.get(t, c, "/login").want(t, http.StatusOK) // the cookie remembers it
	if got := strings.TrimSpace(res.testid("login-submit").Text()); got != "Entrar" {
		t.Errorf("remembered language: button %q", got)
	}
}

func sessionCookieOf(t *testing.T, p page) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == httpkit.SessionCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", httpkit.SessionCookie, p.header.Values("Set-Cookie"))
	return nil
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestDashSettingsKeepsAPIProviderCaps: a provider cap of 20000, valid through PATCH
// /api/v1/settings (0–100000), is shown on /settings and a save of the page as shown
// stores it unchanged (the page once had ranges of its own, 0–10000, and refused it).
// An entry the API set with only maxWaitMs is shown as "w 0 5000" and kept as stored.
func TestDashSettingsKeepsAPIProviderCaps(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	_, token, err := d.store.CreateAPIToken(t.Context(), store.ActorSystem, "ci", store.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	const doc = `{"providers":{"zai":{"maxConcurrent":20000},"w":{"maxWaitMs":5000}}}`
	d.send(t, http.DefaultClient, http.MethodPatch, "/api/v1/settings", "application/merge-patch+json", doc,
		"Authorization", "Bearer "+token).want(t, http.StatusOK)
	before := d.settings(t)

	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	if got, want := form.Get("providers"), "w 0 5000\nzai 20000"; got != want {
		t.Errorf("providers textarea = %q, want %q", got, want)
	}
	d.post(t, c, "/settings", form).want(t, http.StatusSeeOther)
	if diff := cmp.Diff(before, d.settings(t)); diff != "" {
		t.Errorf("a save of the page as shown changed the settings (-before +after):\n%s", diff)
	}
}

// TestDashCSP (issue 24, finding 10): every dashboard page — error pages and the
// cross-origin refusal included — sends DESIGN.md's Content-Security-Policy.
func TestDashCSP(t *testing.T) {
	t.Parallel()
	const want = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
	d := newDash(t)
	check := func(what string, p page) {
		t.Helper()
		if got := p.header.Get("Content-Security-Policy"); got != want {
			t.Errorf("%s (%d): Content-Security-Policy %q, want %q", what, p.status, got, want)
		}
	}
	check("sign-in page", d.get(t, d.client(t), "/login"))
	check("signed-out redirect", d.get(t, d.client(t), "/"))
	c := d.signIn(t, "admin@example.com")
	conn := d.createConnection(t, "zai-main", `{}`)
	for _, p := range []string{"/", "/connections", "/connections/new", "/connections/" + conn.ID, "/settings",
		"/keys", "/tokens", "/audit", "/users", "/account", "/logout", "/connections/00000000-0000-0000-0000-000000000000"} {
		check(p, d.get(t, c, p))
	}
	check("cross-site POST", d.post(t, c, "/settings", url.Values{}, "Sec-Fetch-Site", "cross-site"))
}
