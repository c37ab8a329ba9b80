package handlers

import (
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
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
	if _, ok := httpkit.SessionHash(first.Value); !ok {
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
	old.Jar.SetCookies(mustURL(t, d.srv.URL), []*http.Cookie{{Name: httpkit.SessionCookie, Value: first.Value}})
	d.get(t, old, "/connections").want(t, http.StatusSeeOther)

	// Signing out deletes the session: replaying the cookie sends to sign-in.
	d.post(t, c, "/logout", nil).want(t, http.StatusSeeOther)
	replay := d.client(t)
	replay.Jar.SetCookies(mustURL(t, d.srv.URL), []*http.Cookie{{Name: httpkit.SessionCookie, Value: second.Value}})
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

// TestDashSignInBadEmail: an e-mail that is not valid UTF-8 or holds a control
// character is a failed sign-in — 401, charged and throttled like any failure
// (5 free for the account and address, then 429) — never a 500 or an ERROR line
// (Postgres refuses a NUL in a query parameter; the store never sends it one).
func TestDashSignInBadEmail(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	d := newDashWith(t, func(deps *Deps) {
		deps.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	c := d.client(t)
	// 3 × 5 failures stay within the address's 20: each 429 below is the pair's.
	for _, email := range []string{"admin\x00@example.com", "\xff\xfe@example.com", "admin@example.com\x1b"} {
		form := url.Values{"email": {email}, "password": {"wrong"}}
		for i := range 5 {
			if res := d.post(t, c, "/login", form); res.status != http.StatusUnauthorized {
				t.Fatalf("%q attempt %d: status %d, want 401:\n%s", email, i+1, res.status, res.body)
			}
		}
		res := d.post(t, c, "/login", form)
		res.want(t, http.StatusTooManyRequests)
		if res.header.Get("Retry-After") == "" {
			t.Errorf("%q: 429 without Retry-After", email)
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("an ERROR was logged:\n%s", logs)
	}
}
