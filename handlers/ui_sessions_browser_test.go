package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// sessionChat sends one chat completion of session id through base and
// returns the status and the error code (if any); it may run on any
// goroutine.
func sessionChat(base, secret, id string) (int, string) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"glm-5","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return 0, ""
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gatehouse-Session", id)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return res.StatusCode, e.Error.Code
}

// TestSessionStopInBrowser: a real Chromium on /sessions of a real gateway. A
// session's row appears without a reload when it sends a request; an admin
// clicks its Stop: once the page shows it stopped, its next request is
// refused 403 SESSION_STOPPED while its request in flight finishes and
// another session of the same key is served; Resume lets it continue. Both
// are audited under the admin. A viewer sees the page but no button, and is
// refused 403 on the POST. Every step waits for what the page shows.
func TestSessionStopInBrowser(t *testing.T) {
	t.Parallel()
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(up)
	const secret = "sk-session-browser-0123456789"
	var keyID string
	gw := gateway.New(gateway.Options{Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
		return gateway.ClientKey{ID: keyID, Name: "agents", Enabled: true}, s == secret
	}})
	d := newDashWith(t, func(deps *Deps) { deps.Gateway, deps.Sessions = gw, gw })
	key := d.createKey(t, "agents", `{}`)
	keyID = key.ID
	gw.Apply(gateway.Config{Connections: []gateway.Connection{{
		ID: "c1", Name: "zai-main", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
	}}, ClientKeys: []gateway.ClientKey{{ID: key.ID, Name: "agents", Enabled: true}}})
	hold := make(chan struct{})
	if err := up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(func() {
		release()
		wg.Wait()
		gw.Close()
		upSrv.Close()
	})
	agent, second := session.Hash(key.ID, "agent"), session.Hash(key.ID, "second")

	inflight := make(chan int, 2)
	wg.Go(func() { s, _ := sessionChat(d.srv.URL, secret, "agent"); inflight <- s })

	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	row := func(h string) string { return `[data-session="` + h + `"]` }
	run(t, tab, "open /sessions", chromedp.Navigate(d.srv.URL+"/sessions"), chromedp.WaitVisible(chromedp.CSS(row(agent))))
	run(t, tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	cells := value(t, tab, "read the row", chromedp.Evaluate[[]string](`[...document.querySelectorAll('`+row(agent)+` td')].map(td => td.textContent.replace(/\s+/g, " ").trim())`))
	if len(cells) < 10 || cells[1] != "agents" || cells[2] != "Go-http-client" || cells[4] != "1" || cells[9] != "ok" {
		t.Errorf("row = %q, want key agents, client Go-http-client, 1 in flight, ok", cells)
	}
	if href := value(t, tab, "read the link", chromedp.Evaluate[string](`document.querySelector('`+row(agent)+` [data-testid="session-link"]').getAttribute("href")`)); href != "/requests?session="+agent {
		t.Errorf("link = %q", href)
	}

	// A new session shows up without a reload.
	wg.Go(func() { s, _ := sessionChat(d.srv.URL, secret, "second"); inflight <- s })
	run(t, tab, "the second session appears live", chromedp.Poll[chromedp.Void](`window.notReloaded && document.querySelector('`+row(second)+`') !== null`))

	if status := submit(t, tab, row(agent)+` [data-testid="session-stop"]`); status != http.StatusOK {
		t.Fatalf("Stop: status %d", status)
	}
	run(t, tab, "the row says stopped", chromedp.WaitVisible(chromedp.CSS(row(agent)+`[data-state="stopped"] [data-testid="session-resume"]`)))
	if s, code := sessionChat(d.srv.URL, secret, "agent"); s != http.StatusForbidden || code != "SESSION_STOPPED" {
		t.Errorf("the stopped session's next request = %d %s, want 403 SESSION_STOPPED", s, code)
	}
	release()
	for range 2 {
		if s := <-inflight; s != http.StatusOK {
			t.Errorf("a request in flight at Stop = %d, want 200 (it finishes)", s)
		}
	}
	if s, code := sessionChat(d.srv.URL, secret, "third"); s != http.StatusOK {
		t.Errorf("another session of the key = %d %s, want 200", s, code)
	}
	if status := submit(t, tab, row(agent)+` [data-testid="session-resume"]`); status != http.StatusOK {
		t.Fatalf("Resume: status %d", status)
	}
	run(t, tab, "the row says ok", chromedp.WaitVisible(chromedp.CSS(row(agent)+`[data-state="ok"] [data-testid="session-stop"]`)))
	if s, code := sessionChat(d.srv.URL, secret, "agent"); s != http.StatusOK {
		t.Errorf("the resumed session's request = %d %s, want 200", s, code)
	}
	entries, err := d.store.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntitySession, EntityID: agent}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Action != store.ActionResume || entries[1].Action != store.ActionStop ||
		entries[0].Actor != "user:admin@example.com" || entries[1].Actor != "user:admin@example.com" {
		t.Errorf("audit = %+v, want stop then resume by user:admin@example.com", entries)
	}

	viewerTab := newBrowser(t)
	browserSignIn(t, viewerTab, d.srv.URL, "viewer@example.com")
	run(t, viewerTab, "open /sessions as a viewer", chromedp.Navigate(d.srv.URL+"/sessions"), chromedp.WaitVisible(chromedp.CSS(row(agent))))
	if n := value(t, viewerTab, "count buttons", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="session-stop"], [data-testid="session-resume"]').length`)); n != 0 {
		t.Errorf("a viewer sees %d Stop/Resume buttons, want 0", n)
	}
	d.post(t, d.signIn(t, "viewer@example.com"), "/sessions/"+agent+"/stop", nil).want(t, http.StatusForbidden)
}
