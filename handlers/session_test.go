package handlers

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/store"
)

// guardSessions is a SessionSource over a real session.Guard.
type guardSessions struct{ g *session.Guard }

func (s guardSessions) ListSessions() []session.Info { return s.g.List(time.Hour) }
func (s guardSessions) GetSession(id string) (session.Info, bool) {
	return s.g.Get(id, time.Hour)
}
func (s guardSessions) StopSession(id string) (session.Info, bool)   { return s.g.Stop(id) }
func (s guardSessions) ResumeSession(id string) (session.Info, bool) { return s.g.Resume(id) }

// TestSessionsAPI: GET /api/v1/sessions lists the live sessions (filtered by
// key and state, a bad state 400 naming the field), GET of one answers it or
// 404; an admin's stop and resume change its state and are audited with the
// token as actor; a viewer may read but gets 403 on stop and resume.
func TestSessionsAPI(t *testing.T) {
	t.Parallel()
	g := session.NewGuard(nil)
	for _, r := range []session.Request{
		{KeyID: "k1", KeyName: "agents", Session: "aaaaaaaaaaaaaaaa", Client: "claude-cli"},
		{KeyID: "k2", KeyName: "batch", Session: "bbbbbbbbbbbbbbbb", Client: "codex"},
	} {
		e, _, _ := g.Enter(context.Background(), &r)
		e.Account(100, 20, 80, 1500, "conn-a")
		e.Leave()
	}
	a := newTestAPI(t, apiOptions{sessions: guardSessions{g}})

	items := func(c call) []any {
		t.Helper()
		return a.do(t, c).want(t, http.StatusOK).json(t)["items"].([]any)
	}
	if got := items(call{method: http.MethodGet, path: path("sessions"), token: a.viewer}); len(got) != 2 {
		t.Fatalf("sessions = %v, want 2", got)
	}
	byKey := items(call{method: http.MethodGet, path: path("sessions") + "?key=k1"})
	if len(byKey) != 1 || byKey[0].(map[string]any)["keyName"] != "agents" || byKey[0].(map[string]any)["cacheHitRatio"] != 0.8 ||
		byKey[0].(map[string]any)["costUsd"] != 0.0015 || byKey[0].(map[string]any)["client"] != "claude-cli" {
		t.Errorf("key=k1 = %v, want the one session of agents, cache-hit ratio 0.8, cost 0.0015", byKey)
	}
	p := problemOf(t, a.do(t, call{method: http.MethodGet, path: path("sessions") + "?state=odd", invalidRequest: true}), http.StatusBadRequest)
	if f := fields(p); len(f) != 1 || f[0] != "state" {
		t.Errorf("bad state: fields %v, want [state]", f)
	}
	a.do(t, call{method: http.MethodGet, path: path("sessions", "cccccccccccccccc")}).want(t, http.StatusNotFound)
	a.do(t, call{method: http.MethodPost, path: path("sessions", "cccccccccccccccc", "stop")}).want(t, http.StatusNotFound)

	a.do(t, call{method: http.MethodPost, path: path("sessions", "aaaaaaaaaaaaaaaa", "stop"), token: a.viewer}).want(t, http.StatusForbidden)
	if in, _ := g.Get("aaaaaaaaaaaaaaaa", time.Hour); in.State != "ok" {
		t.Fatalf("a viewer's stop changed the state to %q", in.State)
	}
	if got := a.do(t, call{method: http.MethodPost, path: path("sessions", "aaaaaaaaaaaaaaaa", "stop")}).want(t, http.StatusOK).json(t); got["state"] != "stopped" {
		t.Errorf("stop answered %v, want state stopped", got)
	}
	if got := items(call{method: http.MethodGet, path: path("sessions") + "?state=stopped"}); len(got) != 1 {
		t.Errorf("state=stopped = %v, want the stopped one", got)
	}
	a.do(t, call{method: http.MethodPost, path: path("sessions", "aaaaaaaaaaaaaaaa", "resume"), token: a.viewer}).want(t, http.StatusForbidden)
	if got := a.do(t, call{method: http.MethodPost, path: path("sessions", "aaaaaaaaaaaaaaaa", "resume")}).want(t, http.StatusOK).json(t); got["state"] != "ok" {
		t.Errorf("resume answered %v, want state ok", got)
	}
	entries, err := a.store.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntitySession, EntityID: "aaaaaaaaaaaaaaaa"}, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Action != store.ActionResume || entries[1].Action != store.ActionStop || entries[1].Actor != "token:test-admin" {
		t.Errorf("audit = %+v, want stop then resume by token:test-admin", entries)
	}
}
