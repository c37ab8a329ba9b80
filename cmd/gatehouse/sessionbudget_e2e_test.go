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
