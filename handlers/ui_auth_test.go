package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now()} }

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// delayLog replaces the throttle's sleep: it records each delay instead of waiting.
type delayLog struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (l *delayLog) sleep(_ context.Context, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delays = append(l.delays, d)
	return nil
}

func (l *delayLog) all() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.delays...)
}

func mustPrefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := ParseTrustedProxies(s)
	if err != nil {
		t.Fatalf("ParseTrustedProxies(%q): %v", s, err)
	}
	return p
}

// signInAs posts the sign-in form as a browser behind a proxy at forwardedFor would
// ("" sends no X-Forwarded-For).
func (d *dash) signInAs(t *testing.T, c *http.Client, email, password, forwardedFor string) page {
	t.Helper()
	var headers []string
	if forwardedFor != "" {
		headers = []string{"X-Forwarded-For", forwardedFor}
	}
	return d.post(t, c, "/login", url.Values{"email": {email}, "password": {password}}, headers...)
}

// TestDashOwnerSignsInDespiteStrangers is issue 14's lockout scenario: after 10
// failures on the admin account from address A, strangers poll the sign-in form from A
// and B every 50 ms for 30 s (simulated by the clock, not waited for); the owner with
// the right password from a fresh address C gets in at the first or second try, slowed
// down by at most 2 s.
func TestDashOwnerSignsInDespiteStrangers(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	delays := &delayLog{}
	d := newDashWith(t, func(deps *Deps) {
		deps.Now = clock.now
		deps.TrustedProxies = mustPrefixes(t, "127.0.0.0/8")
	}, func(s *Server) { s.dash.Throttle().Sleep = delays.sleep })
	const addrA, addrB, addrC = "198.51.100.1", "198.51.100.2", "203.0.113.7"
	stranger := d.client(t)

	// 10 failures from A, each throttled wait waited out on the clock.
	for failures := 0; failures < 10; {
		res := d.signInAs(t, stranger, "admin@example.com", "guess", addrA)
		switch res.status {
		case http.StatusUnauthorized:
			failures++
		case http.StatusTooManyRequests:
			secs, err := strconv.Atoi(res.header.Get("Retry-After"))
			if err != nil || secs < 1 {
				t.Fatalf("429 with Retry-After %q", res.header.Get("Retry-After"))
			}
			clock.advance(time.Duration(secs) * time.Second)
		default:
			t.Fatalf("guess from A: status %d", res.status)
		}
	}

	counts := map[string]map[int]int{addrA: {}, addrB: {}}
	ownerTries, ownerIn := 0, false
	owner := d.client(t)
	for tick := range 600 { // 30 s of 50 ms ticks
		for _, addr := range []string{addrA, addrB} {
			res := d.signInAs(t, stranger, "admin@example.com", "guess", addr)
			counts[addr][res.status]++
			if res.status == http.StatusTooManyRequests && res.header.Get("Retry-After") == "" {
				t.Fatalf("a 429 without Retry-After")
			}
		}
		if tick >= 100 && !ownerIn { // the owner arrives 5 s into the attack
			before := len(delays.all())
			res := d.signInAs(t, owner, "admin@example.com", dashPassword, addrC)
			ownerTries++
			switch res.status {
			case http.StatusSeeOther:
				ownerIn = true
				if got := delays.all()[before:]; len(got) != 1 || got[0] > httpkit.AccountMaxDelay {
					t.Errorf("the owner's sign-in was delayed %v, want one delay of at most %v", got, httpkit.AccountMaxDelay)
				}
			case http.StatusTooManyRequests, http.StatusUnauthorized:
			default:
				t.Fatalf("owner: status %d", res.status)
			}
			if !ownerIn && ownerTries >= 2 {
				t.Fatalf("the owner with the right password from a fresh address was refused %d times (last %d)", ownerTries, res.status)
			}
		}
		clock.advance(50 * time.Millisecond)
	}
	if !ownerIn {
		t.Fatal("the owner never got in")
	}
	d.get(t, owner, "/").want(t, http.StatusOK)
	// The strangers' guesses were checked only within their free allowances.
	if n := counts[addrA][http.StatusUnauthorized]; n != 0 {
		t.Errorf("A, past its free failures, had %d more guesses checked, want 0", n)
	}
	if n := counts[addrB][http.StatusUnauthorized]; n > httpkit.PolicyPair.Free+1 {
		t.Errorf("B had %d guesses checked in 30 s, want at most %d", n, httpkit.PolicyPair.Free+1)
	}
	for _, delay := range delays.all() {
		if delay > httpkit.AccountMaxDelay {
			t.Errorf("a sign-in was delayed %v, more than %v", delay, httpkit.AccountMaxDelay)
		}
	}
}

// TestDashParallelGuessesAreCounted: 60 wrong guesses at once from one address — each
// is charged before its password is checked, so only the free allowance reaches the
// password check (401) and the rest are answered 429 with Retry-After.
func TestDashParallelGuessesAreCounted(t *testing.T) {
	t.Parallel()
	d := newDashWith(t, nil, func(s *Server) { s.dash.Throttle().Sleep = (&delayLog{}).sleep })
	const n = 60
	type answer struct {
		status     int
		retryAfter string
		err        error
	}
	answers := make(chan answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			form := url.Values{"email": {"admin@example.com"}, "password": {"guess"}}.Encode()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.srv.URL+"/login", strings.NewReader(form))
			if err != nil {
				answers <- answer{err: err}
				return
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			_ = res.Body.Close()
			answers <- answer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
		})
	}
	close(start)
	wg.Wait()
	close(answers)
	got := map[int]int{}
	for a := range answers {
		if a.err != nil {
			t.Fatalf("guess: %v", a.err)
		}
		got[a.status]++
		if a.status == http.StatusTooManyRequests && a.retryAfter == "" {
			t.Error("a 429 without Retry-After")
		}
	}
	if got[http.StatusUnauthorized] > httpkit.PolicyPair.Free || got[http.StatusUnauthorized]+got[http.StatusTooManyRequests] != n {
		t.Errorf("answers %v: want at most %d × 401 (the free allowance), the rest 429", got, httpkit.PolicyPair.Free)
	}
}

// TestDashTrustedProxies: behind a trusted proxy each browser is throttled by its own
// X-Forwarded-For address; without GATEHOUSE_TRUSTED_PROXIES, or from a peer that is
// not in it, the header is ignored (so a client cannot pick its own address).
func TestDashTrustedProxies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		trusted         string
		wantIndependent bool
	}{
		{name: "peer is a trusted proxy", trusted: "127.0.0.0/8", wantIndependent: true},
		{name: "no trusted proxies", trusted: ""},
		{name: "forged header from an untrusted peer", trusted: "10.0.0.0/8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDashWith(t, func(deps *Deps) { deps.TrustedProxies = mustPrefixes(t, tt.trusted) },
				func(s *Server) { s.dash.Throttle().Sleep = (&delayLog{}).sleep })
			sprayer, other := d.client(t), d.client(t)
			// The first user sprays 20 accounts (the address allowance) from its address.
			for i := range httpkit.PolicyAddress.Free {
				res := d.signInAs(t, sprayer, fmt.Sprintf("nobody%d@example.com", i), "guess", "198.51.100.1")
				res.want(t, http.StatusUnauthorized)
			}
			d.signInAs(t, sprayer, "viewer@example.com", dashPassword, "198.51.100.1").want(t, http.StatusTooManyRequests)
			// The second user, from another address behind the same proxy.
			res := d.signInAs(t, other, "admin@example.com", dashPassword, "192.0.2.50")
			if tt.wantIndependent {
				res.want(t, http.StatusSeeOther)
			} else {
				res.want(t, http.StatusTooManyRequests)
			}
		})
	}
}

// TestDashAccountChangesPassword: any user (a viewer too) changes their own password
// on /account with the current one; this browser stays signed in, every other session
// ends, the old password no longer signs in, and the audit log records the change
// without the secret.
func TestDashAccountChangesPassword(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	const newPassword = "a brand new passphrase"
	mine, elsewhere := d.signIn(t, "viewer@example.com"), d.signIn(t, "viewer@example.com")
	admin := d.signIn(t, "admin@example.com")

	res := d.get(t, mine, "/account").want(t, http.StatusOK)
	if res.testid("password-form").AttrOr("action", "") != "/account" {
		t.Fatalf("no password form posting /account:\n%s", res.body)
	}
	if res.testid("nav-account").AttrOr("href", "") != "/account" {
		t.Error("the layout does not link to /account")
	}

	tests := []struct {
		name  string
		form  url.Values
		field string
	}{
		{name: "wrong current", form: url.Values{"currentPassword": {"not it"}, "newPassword": {newPassword}, "confirmPassword": {newPassword}}, field: "currentPassword"},
		{name: "short new", form: url.Values{"currentPassword": {dashPassword}, "newPassword": {"short"}, "confirmPassword": {"short"}}, field: "newPassword"},
		{name: "mismatch", form: url.Values{"currentPassword": {dashPassword}, "newPassword": {newPassword}, "confirmPassword": {newPassword + "x"}}, field: "confirmPassword"},
	}
	for _, tt := range tests {
		res := d.post(t, mine, "/account", tt.form).want(t, http.StatusUnprocessableEntity)
		if res.testid("error-"+tt.field).Length() != 1 {
			t.Errorf("%s: no error beside %s:\n%s", tt.name, tt.field, res.body)
		}
		if strings.Contains(res.body, newPassword) || strings.Contains(res.body, dashPassword) {
			t.Errorf("%s: a password is echoed back in the page", tt.name)
		}
	}
	d.get(t, elsewhere, "/").want(t, http.StatusOK) // nothing changed yet

	form := url.Values{"currentPassword": {dashPassword}, "newPassword": {newPassword}, "confirmPassword": {newPassword}}
	res = d.post(t, mine, "/account", form).want(t, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/account" {
		t.Errorf("after the change: redirect to %q", loc)
	}
	res = d.get(t, mine, "/account").want(t, http.StatusOK)
	if got := texts(res.testid("flash-message")); len(got) != 1 || !strings.Contains(got[0], "Password changed") {
		t.Errorf("flash = %q", got)
	}
	d.get(t, elsewhere, "/").want(t, http.StatusSeeOther) // the other session ended
	d.get(t, admin, "/").want(t, http.StatusOK)           // other users' sessions stay

	d.signInAs(t, d.client(t), "viewer@example.com", dashPassword, "").want(t, http.StatusUnauthorized)
	d.signInAs(t, d.client(t), "viewer@example.com", newPassword, "").want(t, http.StatusSeeOther)
	wantPasswordAudit(t, d, d.viewer.ID, "user:viewer@example.com", newPassword, dashPassword)
}

// TestDashAdminResetsPassword: an admin sets another user's password on /users; every
// session of that user ends and the old password is refused. A short password is
// refused beside the row's field; a viewer cannot reset; an admin's own goes to /account.
func TestDashAdminResetsPassword(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	const newPassword = "reset by the admin 42"
	viewer := d.signIn(t, "viewer@example.com")
	admin := d.signIn(t, "admin@example.com")
	path := "/users/" + d.viewer.ID + "/password"

	res := d.get(t, admin, "/users").want(t, http.StatusOK)
	if n := res.doc.Find(`form[action="` + path + `"]`).Length(); n != 1 {
		t.Fatalf("the users page has %d reset forms for the viewer, want 1", n)
	}
	d.post(t, viewer, path, url.Values{"password": {newPassword}}).want(t, http.StatusForbidden)

	res = d.post(t, admin, path, url.Values{"password": {"short"}}).want(t, http.StatusUnprocessableEntity)
	if res.testid("error-reset-password").Length() != 1 {
		t.Errorf("no error beside the reset field:\n%s", res.body)
	}
	d.get(t, viewer, "/").want(t, http.StatusOK)

	res = d.post(t, admin, "/users/"+d.admin.ID+"/password", url.Values{"password": {newPassword}}).want(t, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/account" {
		t.Errorf("resetting your own password: redirect to %q, want /account", loc)
	}

	d.post(t, admin, path, url.Values{"password": {newPassword}}).want(t, http.StatusSeeOther)
	d.get(t, viewer, "/").want(t, http.StatusSeeOther) // every session of that user ended
	d.get(t, admin, "/").want(t, http.StatusOK)
	d.signInAs(t, d.client(t), "viewer@example.com", dashPassword, "").want(t, http.StatusUnauthorized)
	d.signInAs(t, d.client(t), "viewer@example.com", newPassword, "").want(t, http.StatusSeeOther)
	d.signInAs(t, d.client(t), "admin@example.com", dashPassword, "").want(t, http.StatusSeeOther) // the admin's own is unchanged
	wantPasswordAudit(t, d, d.viewer.ID, "user:admin@example.com", newPassword, dashPassword)
}

// wantPasswordAudit checks that the newest audit row of user is a set_password by
// actor that holds none of the secrets.
func wantPasswordAudit(t *testing.T, d *dash, userID, actor string, secrets ...string) {
	t.Helper()
	entries, err := d.store.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntityUser, EntityID: userID, Action: store.ActionSetPassword}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 || entries[0].Actor != actor {
		t.Fatalf("newest set_password row of the user = %+v, want one by %s", entries, actor)
	}
	// No row of the user — the password change, the sign-ins — holds a password.
	all, err := d.store.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntityUser, EntityID: userID}, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		row := fmt.Sprintf("%+v %s %s", e, e.Before, e.After)
		for _, s := range secrets {
			if strings.Contains(row, s) {
				t.Errorf("an audit row holds a password: %s", row)
			}
		}
	}
}
