package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
)

func TestDashSignIn(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.client(t)

	// Signed out: every page sends to the sign-in form, keeping where it was going.
	res := d.get(t, c, "/connections?x=1").want(t, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/login?next=%2Fconnections%3Fx%3D1" {
		t.Errorf("redirect to %q", loc)
	}

	// Wrong password: 401 with the form again, email kept.
	res = d.post(t, c, "/login", url.Values{"email": {"admin@example.com"}, "password": {"nope"}, "next": {"/connections"}})
	res.want(t, http.StatusUnauthorized)
	if res.testid("login-error").Length() != 1 {
		t.Errorf("no login-error on a wrong password:\n%s", res.body)
	}
	if v, _ := res.testid("field-email").Attr("value"); v != "admin@example.com" {
		t.Errorf("email not kept: %q", v)
	}

	// Right password: 303 to the local next, a session cookie that holds only an id.
	res = d.post(t, c, "/login", url.Values{"email": {"admin@example.com"}, "password": {dashPassword}, "next": {"/connections"}})
	res.want(t, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/connections" {
		t.Errorf("after sign-in: redirect to %q, want /connections", loc)
	}
	first := sessionCookieOf(t, res)
	if !first.HttpOnly || first.SameSite != http.SameSiteLaxMode || first.Secure {
		t.Errorf("cookie attributes: HttpOnly %v SameSite %v Secure %v", first.HttpOnly, first.SameSite, first.Secure)
	}
	if _, ok := sessionHash(first.Value); !ok {
		t.Errorf("cookie %q is not a 32-byte base64url id", first.Value)
	}
	d.get(t, c, "/connections").want(t, http.StatusOK)

	// Signing in again rotates the id: the old cookie no longer works.
	res = d.post(t, c, "/login", url.Values{"email": {"admin@example.com"}, "password": {dashPassword}})
	res.want(t, http.StatusSeeOther)
	second := sessionCookieOf(t, res)
	if second.Value == first.Value {
		t.Fatal("session id not rotated at sign-in")
	}
	old := d.client(t)
	old.Jar.SetCookies(mustURL(t, d.srv.URL), []*http.Cookie{{Name: sessionCookie, Value: first.Value}})
	d.get(t, old, "/connections").want(t, http.StatusSeeOther)

	// Signing out deletes the session: replaying the cookie sends to sign-in.
	d.post(t, c, "/logout", nil).want(t, http.StatusSeeOther)
	replay := d.client(t)
	replay.Jar.SetCookies(mustURL(t, d.srv.URL), []*http.Cookie{{Name: sessionCookie, Value: second.Value}})
	d.get(t, replay, "/").want(t, http.StatusSeeOther)

	// A next that leaves the site is ignored.
	res = d.post(t, d.client(t), "/login", url.Values{"email": {"admin@example.com"}, "password": {dashPassword}, "next": {"//evil.example/x"}})
	if loc := res.want(t, http.StatusSeeOther).header.Get("Location"); loc != "/" {
		t.Errorf("foreign next: redirect to %q, want /", loc)
	}
}

func TestDashPasswordChangeEndsSessions(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "viewer@example.com")
	d.get(t, c, "/").want(t, http.StatusOK)
	if err := d.store.SetPassword(t.Context(), store.ActorSystem, d.viewer.ID, "another long password"); err != nil {
		t.Fatal(err)
	}
	d.get(t, c, "/").want(t, http.StatusSeeOther)
}

func TestDashRoleChangeAppliesAtOnce(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "viewer@example.com")
	d.get(t, c, "/connections/new").want(t, http.StatusForbidden)
	if _, err := d.store.SetRole(t.Context(), store.ActorSystem, d.viewer.ID, store.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	d.get(t, c, "/connections/new").want(t, http.StatusOK)
}

// Viewers read every page, the user list included, but get none of its controls.
func TestDashViewerReadsUsers(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	viewer := d.signIn(t, "viewer@example.com")
	res := d.get(t, viewer, "/users").want(t, http.StatusOK)
	if got := res.testid("user-row").Length(); got != 2 {
		t.Errorf("a viewer sees %d user rows, want 2 (admin and viewer)", got)
	}
	for _, id := range []string{"user-form", "role-form", "remove"} {
		if n := res.testid(id).Length(); n != 0 {
			t.Errorf("a viewer's user list has %d %q controls, want none", n, id)
		}
	}
	if n := res.testid("nav").Find(`a[href="/users"]`).Length(); n != 1 {
		t.Errorf("nav links to /users %d times for a viewer, want 1", n)
	}

	admin := d.signIn(t, "admin@example.com")
	res = d.get(t, admin, "/users").want(t, http.StatusOK)
	if res.testid("user-form").Length() != 1 || res.testid("role-form").Length() != 1 || res.testid("remove").Length() != 1 {
		t.Error("an admin's user list lacks the add form, the role form or the remove link of the other user")
	}
}

func TestDashSignInThrottled(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.client(t)
	wrong := url.Values{"email": {"admin@example.com"}, "password": {"wrong"}}
	for i := range 5 {
		if res := d.post(t, c, "/login", wrong); res.status != http.StatusUnauthorized {
			t.Fatalf("attempt %d: status %d, want 401", i+1, res.status)
		}
	}
	// Even the right password waits now: it is not checked.
	res := d.post(t, c, "/login", url.Values{"email": {"admin@example.com"}, "password": {dashPassword}})
	res.want(t, http.StatusTooManyRequests)
	if res.testid("login-throttled").Length() != 1 {
		t.Errorf("no login-throttled banner:\n%s", res.body)
	}
	if ra, err := strconv.Atoi(res.header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
		t.Errorf("Retry-After %q, want 1..30", res.header.Get("Retry-After"))
	}
	// Another account from the same address is not locked out by it.
	d.post(t, c, "/login", url.Values{"email": {"viewer@example.com"}, "password": {dashPassword}}).want(t, http.StatusSeeOther)
}

func TestLoginThrottlePolicy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := newLoginThrottle(func() time.Time { return now })
	keys := th.keys("Ada@Example.com", "192.0.2.1")
	var waits []time.Duration
	for range 8 {
		retry, _ := th.begin(keys)
		waits = append(waits, retry)
		now = now.Add(retry) // wait it out, then fail again
	}
	want := []time.Duration{0, 0, 0, 0, 0, 30 * time.Second, 0, time.Minute}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits before each attempt mismatch (-want +got):\n%s", diff)
	}
	// Failures of the account from ever more addresses never refuse a new address,
	// they only slow its password check down, by 2 s at most.
	var delay time.Duration
	for i := range 20 {
		var retry time.Duration
		retry, delay = th.begin(th.keys("ada@example.com", fmt.Sprintf("198.51.100.%d", i)))
		if retry != 0 {
			t.Fatalf("new address %d answered with retry %v; the account key must never refuse", i, retry)
		}
	}
	if delay != accountMaxDelay {
		t.Errorf("account delay after 26 failures %v, want the cap %v", delay, accountMaxDelay)
	}
	// Everything is forgotten 15 minutes after the last failure: never a permanent lockout.
	now = now.Add(throttleForget)
	if retry, delay := th.begin(keys); retry != 0 || delay != 0 {
		t.Errorf("after %v: retry %v delay %v, want 0", throttleForget, retry, delay)
	}
	// A good sign-in clears the account's count but not the address's.
	for range 5 {
		th.begin(keys)
	}
	th.succeeded(keys)
	if retry, _ := th.begin(keys); retry != 0 {
		t.Errorf("after success: retry %v, want 0", retry)
	}
}

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
	var v liveView
	if err := json.Unmarshal([]byte(lv.body), &v); err != nil || len(v.Gates) != 2 {
		t.Errorf("/live: %v %s", err, lv.body)
	}
	// The list's script reads each row's load from connectionLoad (it never builds a
	// gate key): the same numbers as the rendered row.
	if got, want := v.ConnectionLoad[id], (connLoadView{InFlight: 3, Queued: 6}); got != want {
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

// TestDashSignOutIsPost: GET /logout only shows the sign-out button, changing
// nothing; the button's POST signs out, and a cross-site POST is refused (403).
func TestDashSignOutIsPost(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	res := d.get(t, c, "/logout").want(t, http.StatusOK)
	form := res.testid("logout-form")
	if form.AttrOr("method", "") != "post" || form.AttrOr("action", "") != "/logout" || form.Find(`[data-testid="logout-submit"]`).Length() != 1 {
		t.Errorf("GET /logout has no sign-out button posting /logout:\n%s", res.body)
	}
	d.get(t, c, "/connections").want(t, http.StatusOK) // still signed in

	d.post(t, c, "/logout", nil, "Sec-Fetch-Site", "cross-site").want(t, http.StatusForbidden)
	d.get(t, c, "/connections").want(t, http.StatusOK)

	res = d.post(t, c, "/logout", nil).want(t, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/login?signedout=1" {
		t.Errorf("POST /logout: redirect to %q", loc)
	}
	d.get(t, c, "/connections").want(t, http.StatusSeeOther)
	// Signed out, the page has nothing to offer: on to the sign-in form.
	if loc := d.get(t, c, "/logout").want(t, http.StatusSeeOther).header.Get("Location"); loc != "/login" {
		t.Errorf("GET /logout signed out: redirect to %q, want /login", loc)
	}
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
		if c.Name == sessionCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", sessionCookie, p.header.Values("Set-Cookie"))
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
