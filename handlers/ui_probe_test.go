package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// gatewayProber is the Prober cmd wires (cmd/gatehouse/probe.go), over a test's
// gateway.
type gatewayProber struct{ gw *gateway.Gateway }

func (p gatewayProber) Probe(ctx context.Context, id string) (web.ProbeView, error) {
	res, err := p.gw.Probe(ctx, id)
	switch {
	case errors.Is(err, gateway.ErrProbeDisabled):
		return web.ProbeView{Refused: web.ProbeDisabled}, nil
	case errors.Is(err, gateway.ErrProbeUnknown):
		return web.ProbeView{Refused: web.ProbeUnknown}, nil
	case err != nil:
		return web.ProbeView{}, err
	}
	return web.ProbeView{Model: res.Model, Status: res.Status, Text: res.Text, Code: res.Code,
		Message: res.Message, Latency: res.Latency}, nil
}

// connectionTests returns the audit rows of connection id's tests, newest first.
func connectionTests(t *testing.T, st *store.Store, id string) []store.ConnectionTest {
	t.Helper()
	rows, err := st.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntityConnection, EntityID: id, Action: store.ActionTest}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.ConnectionTest
	for _, r := range rows {
		var ct store.ConnectionTest
		if err := json.Unmarshal(r.After, &ct); err != nil {
			t.Fatalf("audit row %s: %v", r.After, err)
		}
		if !strings.HasPrefix(r.Actor, "user:admin@") {
			t.Errorf("test audited as %q, want the admin", r.Actor)
		}
		out = append(out, ct)
	}
	return out
}

// TestConnectionProbeInBrowser: in a real Chromium, "Test connection" on a
// connection's page sends one tiny request through the real gateway to that
// connection and shows the fake upstream's answer; with the upstream answering
// 401, the page shows the status and the upstream's code. Both are audited.
func TestConnectionProbeInBrowser(t *testing.T) {
	t.Parallel()
	d := newTrafficDash(t)
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	run(t, tab, "open the connection", chromedp.Navigate(d.srv.URL+"/connections/"+d.conn.ID),
		chromedp.WaitVisible(chromedp.CSS(tid("probe"))))
	probe := func(what string) map[string]string {
		t.Helper()
		if st := submit(t, tab, tid("probe")); st != http.StatusOK {
			t.Fatalf("%s: status %d", what, st)
		}
		return value(t, tab, what, chromedp.Evaluate[map[string]string](`(() => {
			const r = document.querySelector('[data-testid="probe-result"]');
			const txt = id => { const e = r && r.querySelector('[data-testid="' + id + '"]'); return e ? e.textContent.trim() : ""; };
			return r ? {outcome: r.dataset.outcome, role: r.getAttribute("role"), status: txt("probe-status"), text: txt("probe-text"),
				code: txt("probe-code"), latency: txt("probe-latency"), head: r.querySelector("strong").textContent} : {};
		})()`))
	}
	ok := probe("test a working connection")
	if ok["outcome"] != "ok" || ok["role"] != "status" || ok["status"] != "200 OK" || !strings.HasPrefix(ok["text"], "Hello") ||
		ok["head"] != "Test request to glm-5 answered:" || ok["latency"] == "" {
		t.Errorf("a working connection's test: %v", ok)
	}
	if got := d.up.Stats().ByKey["upstream-key"].Requests; got != 1 {
		t.Errorf("the upstream got %d requests with the connection's key, want the test's one", got)
	}

	if err := d.up.SetKeyBehavior("upstream-key", upstreamtest.Behavior{Fail: "401"}); err != nil {
		t.Fatal(err)
	}
	bad := probe("test a connection whose key the upstream refuses")
	if bad["outcome"] != "error" || bad["status"] != "401 Unauthorized" || bad["code"] != "invalid_api_key" || bad["text"] != "" {
		t.Errorf("a refused key's test: %v", bad)
	}
	got := connectionTests(t, d.store, d.conn.ID)
	if len(got) != 2 || got[0].Status != 401 || got[0].Code != "invalid_api_key" || got[1].Status != 200 || got[1].Model != "glm-5" {
		t.Errorf("audited tests %+v, want the 401 and the 200", got)
	}
}

// TestConnectionProbeForm: "Test connection" is a plain form POST (no script): the
// admin gets the page with the result; a viewer's POST and a cross-site POST are
// refused (403) and nothing is sent or audited; a disabled connection's test says
// so, sends nothing, and is audited as not sent; the button is for admins only.
func TestConnectionProbeForm(t *testing.T) {
	t.Parallel()
	d := newTrafficDash(t)
	admin, viewer := d.signIn(t, "admin@example.com"), d.signIn(t, "viewer@example.com")
	path := "/connections/" + d.conn.ID + "/test"
	page := d.get(t, admin, "/connections/"+d.conn.ID).want(t, http.StatusOK)
	if got := page.testid("probe-form").AttrOr("action", ""); got != path {
		t.Fatalf("the test form posts to %q, want %q", got, path)
	}
	if n := d.get(t, viewer, "/connections/"+d.conn.ID).want(t, http.StatusOK).testid("probe").Length(); n != 0 {
		t.Errorf("a viewer sees the test button")
	}
	d.post(t, viewer, path, url.Values{}).want(t, http.StatusForbidden)
	d.post(t, admin, path, url.Values{}, "Origin", "http://evil.example").want(t, http.StatusForbidden)
	if n := d.up.Stats().Total.Requests; n != 0 {
		t.Fatalf("refused tests reached the upstream %d times", n)
	}
	if got := connectionTests(t, d.store, d.conn.ID); len(got) != 0 {
		t.Fatalf("refused tests were audited: %+v", got)
	}

	res := d.post(t, admin, path, url.Values{}).want(t, http.StatusOK)
	if got := res.testid("probe-result").AttrOr("data-outcome", ""); got != "ok" {
		t.Errorf("outcome %q, want ok\n%s", got, res.testid("probe-result").Text())
	}
	if got := strings.TrimSpace(res.testid("probe-text").Text()); !strings.HasPrefix(got, "Hello") {
		t.Errorf("answer %q, want the fake upstream's", got)
	}
	pt := d.post(t, admin, path, url.Values{}, "Accept-Language", "pt-BR").want(t, http.StatusOK)
	if got := strings.TrimSpace(pt.testid("probe-result").Find("strong").Text()); got != "A requisição de teste para glm-5 respondeu:" {
		t.Errorf("Portuguese result %q", got)
	}

	d.gw.Apply(gateway.Config{Connections: []gateway.Connection{{
		ID: d.conn.ID, Name: d.conn.Name, Provider: "zai", APIStyle: "openai", BaseURL: d.upURL,
		APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: false,
	}}})
	before := d.up.Stats().Total.Requests
	off := d.post(t, admin, path, url.Values{}).want(t, http.StatusOK)
	if got := off.testid("probe-result").AttrOr("data-outcome", ""); got != "refused" {
		t.Errorf("a disabled connection's outcome %q, want refused", got)
	}
	if got := strings.TrimSpace(off.testid("probe-reason").Text()); got != "the connection is disabled; enable it first." {
		t.Errorf("reason %q", got)
	}
	if n := d.up.Stats().Total.Requests; n != before {
		t.Errorf("a disabled connection's test reached the upstream")
	}
	got := connectionTests(t, d.store, d.conn.ID)
	if len(got) != 3 || got[0].NotSent != web.ProbeDisabled || got[1].Status != 200 {
		t.Errorf("audited tests %+v", got)
	}
}
