package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// TestSessionBudgetParallel: a key with sessionBudgetUsd 0.05 and one session
// sending 20 requests at once, each estimated at $0.01 (max_tokens 1000 at $10
// per million output tokens), spread over the gateways: at most 5 reach the
// upstream, the other 15 get 403 SESSION_BUDGET_EXCEEDED — in one process and
// over two replicas sharing one redis-server.
func TestSessionBudgetParallel(t *testing.T) {
	t.Parallel()
	resvModes(t, func(t *testing.T, rs func() *redisChild) {
		var secret string
		e := newResvEnv(t, rs(), func(e *resvEnv) {
			if _, err := e.st.UpdateSettings(t.Context(), "tester", 0, func(store.Settings) (json.RawMessage, error) {
				return json.RawMessage(`{"prices":{"zai/glm-5":{"output":10}}}`), nil
			}); err != nil {
				t.Fatal(err)
			}
			e.conn("c", "sk-up", 0, `{}`)
			_, secret = e.key("agents", `{"sessionBudgetUsd": 0.05}`)
		})
		hold := make(chan struct{})
		t.Cleanup(func() { closeOnce(hold) })
		if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
			t.Fatal(err)
		}
		body := `{"model":"glm-5","messages":[{"role":"user","content":"go"}],"max_tokens":1000}`
		type answer struct {
			status int
			code   string
		}
		answers := make(chan answer, 20)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(context.WithoutCancel(t.Context()), http.MethodPost,
					e.urls[i%len(e.urls)]+"/v1/chat/completions", strings.NewReader(body))
				if err != nil {
					answers <- answer{}
					return
				}
				req.Header.Set("Authorization", "Bearer "+secret)
				req.Header.Set("X-Gatehouse-Session", "fan-out")
				resp, err := e.hc.Do(req)
				if err != nil {
					answers <- answer{}
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var eb struct {
					Error struct {
						Code string `json:"code"`
					} `json:"error"`
				}
				_ = json.Unmarshal(b, &eb)
				answers <- answer{resp.StatusCode, eb.Error.Code}
			})
		}
		deadline := time.After(30 * time.Second) // bounds a failure, never timed
		for i := range 15 {
			select {
			case a := <-answers:
				if a.status != http.StatusForbidden || a.code != "SESSION_BUDGET_EXCEEDED" {
					t.Fatalf("an answer before the dispatched ones were let go = %d %s, want 403 SESSION_BUDGET_EXCEEDED", a.status, a.code)
				}
			case <-deadline:
				t.Fatalf("only %d refusals while the dispatched requests are held (upstream in flight %d), want 15", i, e.up.Stats().Total.InFlight)
			}
		}
		// The 5 reserved ones reach the upstream (the refusals may come first).
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		if err := e.up.WaitInFlight(ctx, 5); err != nil {
			t.Fatalf("waiting for 5 at the upstream: %v (in flight %d)", err, e.up.Stats().Total.InFlight)
		}
		closeOnce(hold)
		wg.Wait()
		close(answers)
		for a := range answers {
			if a.status != http.StatusOK {
				t.Errorf("a dispatched request = %d %s, want 200", a.status, a.code)
			}
		}
		if n := e.up.Requests("sk-up", "glm-5"); n > 5 {
			t.Errorf("the upstream saw %d requests, want at most 5", n)
		}
	})
}

// sessionPost sends a small chat of session id through gateway url and
// returns the status and error code.
func sessionPost(t *testing.T, hc *http.Client, url, secret, id string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"glm-5","messages":[{"role":"user","content":"hi"}],"max_tokens":4}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("X-Gatehouse-Session", id)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &eb)
	return resp.StatusCode, eb.Error.Code
}

// TestSessionStopAcrossReplicas: two replicas sharing one redis-server; an
// operator stops a session on replica 0 and the other replica refuses it too
// (403 SESSION_STOPPED) once it has read the shared stops, while another
// session is served there; a resume on replica 0 lets it go on at replica 1.
// Each step waits for its answer, not for a time.
func TestSessionStopAcrossReplicas(t *testing.T) {
	t.Parallel()
	var secret, keyID string
	e := newResvEnv(t, startRedis(t), func(e *resvEnv) {
		e.conn("c", "sk-up", 0, `{}`)
		var k store.ClientKey
		k, secret = e.key("agents", `{}`)
		keyID = k.ID
	})
	if s, code := sessionPost(t, e.hc, e.urls[0], secret, "agent"); s != http.StatusOK {
		t.Fatalf("first request = %d %s", s, code)
	}
	id := session.Hash(keyID, "agent")
	if _, ok := e.gws[0].StopSession(id); !ok {
		t.Fatal("replica 0 does not know the session")
	}
	until := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // bounds a failure, never timed
		for {
			s, code := sessionPost(t, e.hc, e.urls[1], secret, "agent")
			if s == want && (want == http.StatusOK || code == "SESSION_STOPPED") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: replica 1 still answers %d %s", what, s, code)
			}
		}
	}
	until("after the stop on replica 0", http.StatusForbidden)
	if s, code := sessionPost(t, e.hc, e.urls[1], secret, "other"); s != http.StatusOK {
		t.Errorf("another session on replica 1 = %d %s, want 200", s, code)
	}
	if s, code := sessionPost(t, e.hc, e.urls[0], secret, "agent"); s != http.StatusForbidden || code != "SESSION_STOPPED" {
		t.Errorf("replica 0 = %d %s, want 403 SESSION_STOPPED", s, code)
	}
	if _, ok := e.gws[0].ResumeSession(id); !ok {
		t.Fatal("resume: replica 0 does not know the session")
	}
	until("after the resume on replica 0", http.StatusOK)
}
