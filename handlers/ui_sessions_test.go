package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/store"
)

// TestUISessions: /sessions lists each live session with its key, client,
// requests, in flight, tokens, cache-hit ratio, cost, connection and state,
// linking to /requests?session=; key= and state= filter it; /sessions/live
// sends the same rows as the fragment "sessions". A viewer sees no Stop
// button and is refused 403 on the POST; an admin's Stop and Resume change the
// state, redirect with a flash and are audited under the user.
func TestUISessions(t *testing.T) {
	t.Parallel()
	g := session.NewGuard(nil)
	for _, r := range []session.Request{
		{KeyID: "k1", KeyName: "agents", Session: "aaaaaaaaaaaaaaaa", Client: "claude-cli"},
		{KeyID: "k2", KeyName: "batch", Session: "bbbbbbbbbbbbbbbb", Client: "codex"},
	} {
		e, _, _ := g.Enter(context.Background(), &r)
		e.Account(1000, 200, 750, 12_500, "zai-main")
		if r.KeyID == "k2" {
			e.Leave()
		}
	}
	d := newDashWith(t, func(deps *Deps) { deps.Sessions = guardSessions{g} })
	viewer := d.signIn(t, "viewer@example.com")
	admin := d.signIn(t, "admin@example.com")

	p := d.get(t, viewer, "/sessions").want(t, http.StatusOK)
	if n := p.testid("session-row").Length(); n != 2 {
		t.Fatalf("rows = %d, want 2\n%s", n, p.body)
	}
	row := p.doc.Find(`[data-session="aaaaaaaaaaaaaaaa"]`)
	cells := texts(row.Find("td"))
	want := []string{"aaaaaaaaaaaaaaaa", "agents", "claude-cli", "1", "1", "1200", "75 %", "$0.0125", "zai-main", "ok"}
	if strings.Join(cells, "|") != strings.Join(want, "|") {
		t.Errorf("row cells = %q, want %q", cells, want)
	}
	if href, _ := row.Find(`[data-testid="session-link"]`).Attr("href"); href != "/requests?session=aaaaaaaaaaaaaaaa" {
		t.Errorf("session link = %q, want /requests?session=aaaaaaaaaaaaaaaa", href)
	}
	if p.testid("session-stop").Length() != 0 {
		t.Error("a viewer sees a Stop button")
	}
	if url, _ := p.testid("sessions-page").Attr("data-live-url"); url != "/sessions/live" {
		t.Errorf("data-live-url = %q, want /sessions/live", url)
	}
	if n := d.get(t, viewer, "/sessions?key=k2").testid("session-row").Length(); n != 1 {
		t.Errorf("key=k2 rows = %d, want 1", n)
	}
	d.post(t, viewer, "/sessions/aaaaaaaaaaaaaaaa/stop", nil).want(t, http.StatusForbidden)
	if in, _ := g.Get("aaaaaaaaaaaaaaaa", time.Hour); in.State != "ok" {
		t.Fatalf("a viewer's POST stopped the session (%s)", in.State)
	}

	if n := d.get(t, admin, "/sessions").testid("session-stop").Length(); n != 2 {
		t.Errorf("an admin sees %d Stop buttons, want 2", n)
	}
	res := d.post(t, admin, "/sessions/aaaaaaaaaaaaaaaa/stop?state=stopped", nil).want(t, http.StatusSeeOther)
	if loc := res.header.Get("Location"); loc != "/sessions?state=stopped" {
		t.Errorf("redirect to %q, want back to the filtered page", loc)
	}
	p = d.get(t, admin, "/sessions?state=stopped").want(t, http.StatusOK)
	if n := p.testid("session-row").Length(); n != 1 || p.testid("session-resume").Length() != 1 || p.testid("flash-message").Length() != 1 {
		t.Errorf("after Stop: %d rows, %d Resume buttons, %d flashes; want 1 each\n%s", n, p.testid("session-resume").Length(), p.testid("flash-message").Length(), p.body)
	}
	live := d.get(t, viewer, "/sessions/live?state=stopped").want(t, http.StatusOK)
	var lv struct {
		Fragments map[string]string `json:"fragments"`
	}
	if err := json.Unmarshal([]byte(live.body), &lv); err != nil {
		t.Fatal(err)
	}
	if f := lv.Fragments["sessions"]; !strings.Contains(f, `data-session="aaaaaaaaaaaaaaaa"`) || strings.Contains(f, "bbbbbbbbbbbbbbbb") || strings.Contains(f, "session-resume") {
		t.Errorf("live fragment for a viewer = %s, want the stopped row without buttons", f)
	}
	d.post(t, admin, "/sessions/aaaaaaaaaaaaaaaa/resume", nil).want(t, http.StatusSeeOther)
	if in, _ := g.Get("aaaaaaaaaaaaaaaa", time.Hour); in.State != "ok" {
		t.Errorf("state after Resume = %q", in.State)
	}
	d.post(t, admin, "/sessions/cccccccccccccccc/stop", nil).want(t, http.StatusNotFound)
	entries, err := d.store.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntitySession}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[1].Action != store.ActionStop || entries[0].Action != store.ActionResume || entries[0].Actor != "user:admin@example.com" {
		t.Errorf("audit = %+v, want stop then resume by user:admin@example.com", entries)
	}
}

// TestSessionGuardLimits: the runaway guards' limits are client-key limits
// like the others — saved from /keys/{id} (blank = the settings' default), a
// bad one worded beside its field with nothing written, and read from a
// config file with bad values named by path — and settings defaults.
func TestSessionGuardLimits(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "agents", `{"loopLimit":8}`)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK).testid("key-form"))
	if form.Get("loopLimit") != "8" || form.Get("sessionMaxConcurrent") != "" {
		t.Fatalf("guard fields %q %q, want 8 and blank", form.Get("loopLimit"), form.Get("sessionMaxConcurrent"))
	}
	form.Set("sessionMaxConcurrent", "4")
	form.Set("sessionBudgetUsd", "0.05")
	form.Set("loopWindowMs", "60000")
	d.post(t, c, "/keys/"+k.ID, form).want(t, http.StatusSeeOther)
	got, after := d.keyLimits(t, k.ID)
	if want := map[string]any{"loopLimit": 8.0, "sessionMaxConcurrent": 4.0, "sessionBudgetUsd": 0.05, "loopWindowMs": 60000.0}; !mapsEqual(got, want) {
		t.Errorf("stored limits = %v, want %v", got, want)
	}
	form = formValues(d.get(t, c, "/keys/"+k.ID).want(t, http.StatusOK).testid("key-form"))
	form.Set("loopWindowMs", "5")
	res := d.post(t, c, "/keys/"+k.ID, form).want(t, http.StatusUnprocessableEntity)
	if msgs := texts(res.testid("error-loopWindowMs").Find("li")); len(msgs) != 1 || !strings.Contains(msgs[0], "1000") {
		t.Errorf("error beside loopWindowMs = %q", msgs)
	}
	if _, again := d.keyLimits(t, k.ID); again.Version != after.Version {
		t.Errorf("a bad form was written: version %d → %d", after.Version, again.Version)
	}

	a := newTestAPI(t, apiOptions{})
	doc := "settings:\n  loopLimit: 8\n  sessionBudgetUsd: 2.5\nclientKeys:\n  - name: team-a\n    limits:\n      sessionMaxConcurrent: 4\n"
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: doc, contentType: api.YAMLContentType}).want(t, http.StatusOK)
	set := a.do(t, call{method: http.MethodGet, path: path("settings")}).want(t, http.StatusOK).json(t)
	if set["loopLimit"] != 8.0 || set["sessionBudgetUsd"] != 2.5 || set["loopWindowMs"] != 600000.0 || set["affinityTtlMs"] != 300000.0 {
		t.Errorf("settings = %v, want loopLimit 8, sessionBudgetUsd 2.5 and the defaults", set)
	}
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"),
		body: "clientKeys:\n  - name: team-a\n    limits:\n      sessionMaxConcurrent: -1\n      sessionBudgetUsd: 0.001\n", contentType: api.YAMLContentType, invalidRequest: true}),
		http.StatusUnprocessableEntity)
	if f := strings.Join(fields(p), " "); f != "clientKeys[team-a].limits.sessionBudgetUsd clientKeys[team-a].limits.sessionMaxConcurrent" {
		t.Errorf("reported fields = %s", f)
	}
}

func mapsEqual(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestDashSettingsSessionGuards: /settings saves the runaway guards' defaults
// (a dollar amount for sessionBudgetUsd) and words a bad one beside its field.
func TestDashSettingsSessionGuards(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.signIn(t, "admin@example.com")
	form := formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	form.Set("sessionMaxConcurrent", "4")
	form.Set("sessionBudgetUsd", "2.5")
	form.Set("loopLimit", "8")
	d.post(t, c, "/settings", form).want(t, http.StatusSeeOther)
	got := d.settings(t)
	if got["sessionMaxConcurrent"] != 4.0 || got["sessionBudgetUsd"] != 2.5 || got["loopLimit"] != 8.0 {
		t.Errorf("stored settings = %v, want sessionMaxConcurrent 4, sessionBudgetUsd 2.5, loopLimit 8", got)
	}
	form = formValues(d.get(t, c, "/settings").want(t, http.StatusOK).testid("settings-form"))
	if form.Get("sessionBudgetUsd") != "2.5" || form.Get("loopLimit") != "8" {
		t.Errorf("form shows %q %q", form.Get("sessionBudgetUsd"), form.Get("loopLimit"))
	}
	form.Set("sessionBudgetUsd", "0.001")
	res := d.post(t, c, "/settings", form).want(t, http.StatusUnprocessableEntity)
	if msgs := texts(res.testid("error-sessionBudgetUsd").Find("li")); len(msgs) != 1 {
		t.Errorf("errors beside sessionBudgetUsd = %q, want one", msgs)
	}
}
