package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestAlertsEndToEnd: a gatehouse process, a local webhook receiver. The
// bootstrap key ($0.004 a request, budgetUsdDaily $0.04) crosses 80 % at
// its 8th request and 100 % at its 10th: two budget.threshold alerts; a
// connection answering 401 is suspended: one connection.health alert
// naming it, with the reason; a session replaying one tool call is
// refused by the runaway guard (loopLimit 3): one session.guard alert,
// naming the session hashed, as the request log does.
// Then 50 more requests of each (refused for the budget, failing on the
// suspended connection, refused for the loop), within the cooldown, alert
// nothing more: the receiver holds exactly those four.
func TestAlertsEndToEnd(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("alert body %q: %v", b, err)
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	defer recv.Close()
	of := func(event string) []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var out []map[string]any
		for _, m := range got {
			if m["event"] == event {
				out = append(out, m)
			}
		}
		return out
	}

	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "m-sus"}, UsageTokens: 1000})
	p := serveOnURL(t, storetest.URL(t), store.GenerateSecretKey())
	apiDo(t, p, http.MethodPatch, "/api/v1/settings", `{"loopLimit":3,"alerts":[{"name":"ops","url":"`+recv.URL+`","format":"json",
		"events":["budget.threshold","connection.health","session.guard"]}]}`, &map[string]any{})
	setUpBudget(t, []*proc{p}, up.URL(), `{"budgetUsdDaily":0.04}`, "budgetUsdDaily")
	var loopKey struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	apiDo(t, p, http.MethodPost, "/api/v1/client-keys", `{"name":"looper"}`, &loopKey)
	if err := up.SetKeyBehavior("sus-key", upstreamtest.Behavior{Fail: "401"}); err != nil {
		t.Fatal(err)
	}
	apiDo(t, p, http.MethodPost, "/api/v1/connections", fmt.Sprintf(`{"name":"sus-conn","provider":"sus","apiStyle":"openai",
		"baseUrl":%q,"apiKey":"sus-key","models":["m-sus"]}`, up.URL()+"/v1"), &apiConnection{})
	ctx := t.Context()

	// Budget: 80 % after the 8th request, 100 % after the 10th.
	for i := range 10 {
		if r, err := budgetPost(ctx, p, budgetBody("glm-5")); err != nil || r.status != http.StatusOK {
			t.Fatalf("request %d = %d %s (%v), want 200", i+1, r.status, r.code, err)
		}
		if i == 7 {
			waitFor(t, 10*time.Second, "the 80 % alert", func() bool { return len(of("budget.threshold")) == 1 })
		}
	}
	waitFor(t, 10*time.Second, "the 100 % alert", func() bool { return len(of("budget.threshold")) == 2 })

	// A 401: the connection is suspended.
	waitFor(t, 10*time.Second, "the suspended connection", func() bool {
		st, err := chat(ctx, p, "m-sus")
		return err == nil && st != http.StatusNotFound && len(of("connection.health")) == 1
	})

	// A loop: 3 distinct tool turns, then one call replayed.
	bodies := loopBodies("glm-4.7", 6)
	loop := func(body string) int {
		r, err := postSession(ctx, p, loopKey.Secret, "loopy", body)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	refused := 0
	for _, b := range bodies {
		if loop(b) == http.StatusForbidden {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the looping session was never refused")
	}
	waitFor(t, 10*time.Second, "the session.guard alert", func() bool { return len(of("session.guard")) == 1 })

	// 50 more of each, within the cooldown.
	for i := range 50 {
		if r, err := budgetPost(ctx, p, budgetBody("glm-5")); err != nil || r.status != http.StatusTooManyRequests {
			t.Fatalf("budget request %d after 100 %% = %d %s (%v), want 429", i+1, r.status, r.code, err)
		}
		if st, err := chat(ctx, p, "m-sus"); err != nil || st == http.StatusOK {
			t.Fatalf("request %d on the suspended connection = %d (%v), want refused", i+1, st, err)
		}
		if st := loop(bodies[len(bodies)-1]); st != http.StatusForbidden {
			t.Fatalf("loop request %d = %d, want 403", i+1, st)
		}
	}
	// Nothing more was queued (each event is queued, or not, before its
	// request is answered), and the four queued were delivered once.
	if n := metricValue(t, p, "gatehouse_alerts_emitted_total"); n != 4 {
		t.Errorf("%v alert events queued, want 4", n)
	}
	var alerts struct {
		Deliveries []store.AlertDelivery `json:"deliveries"`
	}
	waitFor(t, 10*time.Second, "every delivery recorded delivered", func() bool {
		apiDo(t, p, http.MethodGet, "/api/v1/alerts", "", &alerts)
		for _, d := range alerts.Deliveries {
			if d.Status != "delivered" {
				return false
			}
		}
		return len(alerts.Deliveries) == 4
	})
	if n := len(of("budget.threshold")) + len(of("connection.health")) + len(of("session.guard")); n != 4 {
		mu.Lock()
		t.Fatalf("the receiver got %d alerts, want 4: %v", n, got)
	}
	var conds []string
	for _, m := range of("budget.threshold") {
		d, _ := m["details"].(map[string]any)
		conds = append(conds, fmt.Sprint(m["subject"], " ", d["period"], " ", d["percent"]))
	}
	if want := "[bootstrap daily 80 bootstrap daily 100]"; fmt.Sprint(conds) != want {
		t.Errorf("budget alerts %v, want %s", conds, want)
	}
	h := of("connection.health")[0]
	if d, _ := h["details"].(map[string]any); h["subject"] != "sus-conn" || d["state"] != "suspended" || d["reason"] != "upstream 401" {
		t.Errorf("connection.health alert = %v, want sus-conn suspended for upstream 401", h)
	}
	s := of("session.guard")[0]
	// Sessions are named only hashed (with their key), as in the request log.
	if d, _ := s["details"].(map[string]any); s["subject"] != session.Hash(loopKey.ID, "loopy") || d["state"] != "looping" || d["key"] != "looper" {
		t.Errorf("session.guard alert = %v, want looper's session loopy (hashed) looping", s)
	}
}

// loopBodies is an agent's requests over a conversation of 3 distinct tool
// turns and then n of one call with one result (each call with its own id),
// in OpenAI chat's shape: request j carries the first j turns.
func loopBodies(model string, n int) []string {
	msgs := []string{`{"role":"user","content":"fix the failing test"}`}
	var bodies []string
	for i := range 3 + n {
		id, path, result := fmt.Sprintf("call_d%d", i), fmt.Sprintf("src/f%d.go", i), fmt.Sprintf("package f%d", i)
		if i >= 3 {
			id, path, result = fmt.Sprintf("call_l%d", i), "go.mod", "module x"
		}
		msgs = append(msgs,
			fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"read_file","arguments":%q}}]}`,
				id, `{"path":"`+path+`"}`),
			fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":%q}`, id, result))
		bodies = append(bodies, `{"model":"`+model+`","max_tokens":16,"messages":[`+strings.Join(msgs, ",")+`]}`)
	}
	return bodies
}

// postSession sends body with secret under session id and returns the status.
func postSession(ctx context.Context, p *proc, secret, session, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gatehouse-Session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
