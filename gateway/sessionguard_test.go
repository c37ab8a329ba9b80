package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// withSession is the headers of a request by secret in session id.
func withSession(secret, id string) []string {
	return []string{"Authorization", "Bearer " + secret, "X-Gatehouse-Session", id}
}

// toolTurn is one tool call of an agent and its result.
type toolTurn struct{ callID, path, result string }

// transcript returns the bodies an agent sends over a conversation: request
// j carries the task and the first j tool turns, so that its last two
// messages are turn j's call and result. anthropic picks the Messages API's
// shape (tool_use / tool_result), else OpenAI chat's (tool_calls / tool).
func transcript(model string, anthropic bool, turns []toolTurn) []string {
	msgs := []string{`{"role":"user","content":"fix the failing test"}`}
	bodies := make([]string, 0, len(turns))
	for _, t := range turns {
		if anthropic {
			msgs = append(msgs,
				fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":"read_file","input":{"path":%q}}]}`, t.callID, t.path),
				fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%q}]}`, t.callID, t.result))
		} else {
			msgs = append(msgs,
				fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":"read_file","arguments":%q}}]}`,
					t.callID, `{"path":"`+t.path+`"}`),
				fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":%q}`, t.callID, t.result))
		}
		bodies = append(bodies, `{"model":"`+model+`","max_tokens":16,"messages":[`+strings.Join(msgs, ",")+`]}`)
	}
	return bodies
}

// loopingTurns is 3 distinct tool turns and then n of one call with one
// result, every call with an id of its own.
func loopingTurns(prefix string, n int) []toolTurn {
	var ts []toolTurn
	for i := range 3 {
		ts = append(ts, toolTurn{callID: fmt.Sprintf("%s_d%d", prefix, i), path: fmt.Sprintf("src/f%d.go", i), result: fmt.Sprintf("package f%d", i)})
	}
	for i := range n {
		ts = append(ts, toolTurn{callID: fmt.Sprintf("%s_l%d", prefix, i), path: "go.mod", result: "module x"})
	}
	return ts
}

// TestSessionLoopDetected: with loopLimit 8 (the settings' default for keys
// without one), a replayed transcript whose last 10 turns repeat one tool call
// with one result (the tool-call ids differing) is served for 8 of them and
// refused at the 9th with 403 LOOP_DETECTED in the route's error shape, and
// stays refused; the same turn under another session of the key, and under
// the same session id of another key, is served. Both the OpenAI and the
// Anthropic shapes; gatehouse_session_guard_total{reason="loop"} counts them.
func TestSessionLoopDetected(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-a": {ID: "ka", Name: "a", Enabled: true},
		"sk-b": {ID: "kb", Name: "b", Enabled: true},
	}
	reg := prometheus.NewRegistry()
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), func(o *Options) { o.Registerer = reg })
	an := e.conn("an", "k2", "claude-x")
	an.APIStyle, an.Provider = "anthropic", "anthropic"
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5"), an}, ClientKeys: keyConfig(keys),
		Settings: limits.Settings{LoopLimit: ptr(8)}})
	ctx := testCtx(t)

	for _, style := range []struct {
		name, path, model string
		anthropic         bool
	}{{"OpenAI", "/v1/chat/completions", "glm-5", false}, {"Anthropic", "/v1/messages", "claude-x", true}} {
		t.Run(style.name, func(t *testing.T) {
			bodies := transcript(style.model, style.anthropic, loopingTurns("call", 10))
			sid := "loop-" + style.name
			for i, b := range bodies {
				r := e.post(ctx, style.path, b, withSession("sk-a", sid)...)
				loopTurn := i - 3 + 1 // 1-based turn of the loop, ≤ 0 before it
				if loopTurn <= 8 {
					if r.status != http.StatusOK {
						t.Fatalf("request %d (loop turn %d) = %d %s, want 200", i+1, loopTurn, r.status, r.body)
					}
					continue
				}
				var eb errorBody
				if err := json.Unmarshal([]byte(r.body), &eb); err != nil {
					t.Fatal(err)
				}
				if r.status != http.StatusForbidden || eb.Error.Code != CodeLoopDetected {
					t.Fatalf("loop turn %d = %d %s, want 403 %s", loopTurn, r.status, r.body, CodeLoopDetected)
				}
				if style.anthropic != (eb.Type == "error") {
					t.Errorf("error shape on %s = %s, want the %s shape", style.path, r.body, style.name)
				}
			}
			last := bodies[len(bodies)-1]
			if r := e.post(ctx, style.path, last, withSession("sk-a", sid+"-other")...); r.status != http.StatusOK {
				t.Errorf("the loop's turn under another session = %d %s, want 200", r.status, r.body)
			}
			if r := e.post(ctx, style.path, last, withSession("sk-b", sid)...); r.status != http.StatusOK {
				t.Errorf("the loop's turn under another key's same session id = %d %s, want 200", r.status, r.body)
			}
			in, ok := e.gw.Sessions().Get(session.Hash("ka", sid), time.Hour)
			if !ok || in.State != "looping" {
				t.Errorf("session state = %+v (known %v), want looping", in, ok)
			}
		})
	}
	if v, ok := metricValue(t, reg, "gatehouse_session_guard_total", map[string]string{"reason": "loop"}); !ok || v != 4 {
		t.Errorf(`gatehouse_session_guard_total{reason="loop"} = %v (present %v), want 4`, v, ok)
	}
}

// TestSessionDistinctTurnsPass: 200 generated sessions of 10 distinct tool
// turns each (their calls and results all differ) pass loopLimit 8 with no
// refusal.
func TestSessionDistinctTurnsPass(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{"sk-a": {ID: "ka", Name: "a", Enabled: true, Limits: limits.ClientKeyLimits{LoopLimit: ptr(8)}}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, ClientKeys: keyConfig(keys)})
	// 2000 requests: under -race on a loaded machine they take longer than
	// testCtx allows. The deadline only bounds a failure.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	var refused, served atomic.Int64
	var wg sync.WaitGroup
	sessions := make(chan int)
	for range 8 {
		wg.Go(func() {
			for s := range sessions {
				var turns []toolTurn
				for i := range 10 {
					// Sessions share their tools and early turns; each turn of a
					// session reads a file of its own.
					turns = append(turns, toolTurn{callID: fmt.Sprintf("call_%d_%d", s, i),
						path: fmt.Sprintf("src/f%d.go", (s+i)%23), result: fmt.Sprintf("line %d of f%d", i, (s+i)%23)})
				}
				for _, b := range transcript("glm-5", false, turns) {
					r := e.post(ctx, "/v1/chat/completions", b, withSession("sk-a", fmt.Sprintf("agent-%d", s))...)
					if r.status == http.StatusOK {
						served.Add(1)
					} else {
						refused.Add(1)
						t.Errorf("session %d: %d %s", s, r.status, r.body)
					}
				}
			}
		})
	}
	for s := range 200 {
		sessions <- s
	}
	close(sessions)
	wg.Wait()
	if refused.Load() != 0 || served.Load() != 2000 {
		t.Errorf("served %d, refused %d; want 2000 served, 0 refused", served.Load(), refused.Load())
	}
}

// TestSessionMaxConcurrent: with sessionMaxConcurrent 4, one session firing 20
// requests at once never has more than 4 at the upstream (its model is its
// own, and the fake upstream counts the peak per model), the rest wait and
// all complete; another session of the key is served alongside.
func TestSessionMaxConcurrent(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{"sk-a": {ID: "ka", Name: "a", Enabled: true, Limits: limits.ClientKeyLimits{SessionMaxConcurrent: ptr(4)}}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-a", "glm-b")}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)

	done := make(chan reply, 23)
	for range 20 {
		go func() {
			done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-a", false), withSession("sk-a", "fan-out")...)
		}()
	}
	hash := session.Hash("ka", "fan-out")
	waitFor(t, 10*time.Second, "4 of the session's requests in flight and 16 waiting", func() bool {
		in, ok := e.gw.Sessions().Get(hash, time.Hour)
		return ok && in.InFlight == 4 && in.Waiting == 16 && e.up.Stats().Total.InFlight == 4
	})
	for range 3 {
		go func() {
			done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-b", false), withSession("sk-a", "other")...)
		}()
	}
	waitFor(t, 10*time.Second, "the other session's 3 requests at the upstream beside the first's 4", func() bool {
		return e.up.Stats().Total.InFlight == 7
	})
	close(hold)
	for range 23 {
		if r := <-done; r.status != http.StatusOK {
			t.Errorf("status = %d, want 200: %s", r.status, r.body)
		}
	}
	if p := e.up.Peak("k1", "glm-a"); p != 4 {
		t.Errorf("peak of the session's requests at the upstream = %d, want its cap 4", p)
	}
	if n := e.up.Requests("k1", "glm-a"); n != 20 {
		t.Errorf("the session's requests served = %d, want 20", n)
	}
	if in, _ := e.gw.Sessions().Get(hash, time.Hour); in.InFlight != 0 || in.Waiting != 0 || in.Requests != 20 {
		t.Errorf("session after = %+v, want 20 requests, none in flight or waiting", in)
	}
}

// TestSessionMaxConcurrentTimeout: a session's request that finds no slot
// under its cap within the key's maxWaitMs is answered 429 SEMAPHORE_TIMEOUT
// naming gate session:<session>.
func TestSessionMaxConcurrentTimeout(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{"sk-a": {ID: "ka", Name: "a", Enabled: true,
		Limits: limits.ClientKeyLimits{SessionMaxConcurrent: ptr(1), MaxWaitMs: ptr(1)}}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	done := make(chan reply, 1)
	go func() {
		done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), withSession("sk-a", "s")...)
	}()
	waitFor(t, 10*time.Second, "the first request at the upstream", func() bool { return e.up.Stats().Total.InFlight == 1 })
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), withSession("sk-a", "s")...)
	gate := "session:" + session.Hash("ka", "s")
	if r.status != http.StatusTooManyRequests || r.errorCode(t) != "SEMAPHORE_TIMEOUT" || r.header.Get("X-Gatehouse-Gate") != gate {
		t.Errorf("second request = %d %s (gate %q), want 429 SEMAPHORE_TIMEOUT at %s", r.status, r.body, r.header.Get("X-Gatehouse-Gate"), gate)
	}
	close(hold)
	if r := <-done; r.status != http.StatusOK {
		t.Errorf("first request = %d %s", r.status, r.body)
	}
}

// TestSessionBudget: with sessionBudgetUsd 0.05 and 20 parallel requests each
// estimated at $0.01 (1000 output tokens at $10 per million), at most 5 are
// dispatched and the rest are answered 403 SESSION_BUDGET_EXCEEDED; another
// session of the key is served after.
func TestSessionBudget(t *testing.T) {
	t.Parallel()
	budget := limits.Micros(50_000)
	keys := map[string]ClientKey{"sk-a": {ID: "ka", Name: "a", Enabled: true, Limits: limits.ClientKeyLimits{SessionBudgetUSD: &budget}}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	out := limits.Micros(10_000_000)
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, ClientKeys: keyConfig(keys),
		Settings: limits.Settings{Prices: limits.Prices{"glm-5": {Output: &out}}}})
	ctx := testCtx(t)

	body := chatBodyMax("glm-5", 1000)
	done := make(chan reply, 20)
	for range 20 {
		go func() { done <- e.post(ctx, "/v1/chat/completions", body, withSession("sk-a", "spender")...) }()
	}
	deadline := time.After(minWait) // bounds a failure, never timed
	for refused := 0; refused < 15; refused++ {
		select {
		case r := <-done:
			if r.status != http.StatusForbidden || r.errorCode(t) != CodeSessionBudget {
				t.Fatalf("a request answered before the held ones = %d %s, want 403 %s", r.status, r.body, CodeSessionBudget)
			}
		case <-deadline:
			t.Fatalf("%d refusals while the dispatched requests are held (in flight %d), want 15", refused, e.up.Stats().Total.InFlight)
		}
	}
	waitFor(t, minWait, "the 5 reserved requests at the upstream", func() bool { return e.up.Stats().Total.InFlight == 5 })
	close(hold)
	for range 5 {
		if r := <-done; r.status != http.StatusOK {
			t.Errorf("a dispatched request = %d %s, want 200", r.status, r.body)
		}
	}
	if n := e.up.Requests("k1", "glm-5"); n > 5 {
		t.Errorf("the upstream saw %d requests, want at most 5", n)
	}
	if r := e.post(ctx, "/v1/chat/completions", body, withSession("sk-a", "spender")...); r.status != http.StatusForbidden {
		t.Errorf("the over-budget session's next request = %d, want 403 (held)", r.status)
	}
	if r := e.post(ctx, "/v1/chat/completions", body, withSession("sk-a", "frugal")...); r.status != http.StatusOK {
		t.Errorf("another session's request = %d %s, want 200", r.status, r.body)
	}
}

// TestSessionStopResume: a stopped session's requests in flight finish, its
// next request is refused 403 SESSION_STOPPED (the Gemini shape on a Gemini
// route, by the X-Gatehouse-Session header), another session of the key is
// served, and after Resume it goes on. An idle gap of the affinity TTL also
// ends the hold.
func TestSessionStopResume(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnv(t, upstreamtest.Options{}, withClock(clock))
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5"), e.geminiConn("g1", "k3", "gemini-x")}})
	ctx := testCtx(t)
	hdr := []string{"Authorization", "Bearer " + testClientKey, "X-Gatehouse-Session", "agent"}
	hash := session.Hash("test-key", "agent")

	inflight := make(chan reply, 1)
	go func() { inflight <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), hdr...) }()
	waitFor(t, 10*time.Second, "the session's request at the upstream", func() bool { return e.up.Stats().Total.InFlight == 1 })
	if _, ok := e.gw.Sessions().Stop(hash); !ok {
		t.Fatal("Stop: session unknown")
	}
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), hdr...)
	if r.status != http.StatusForbidden || r.errorCode(t) != CodeSessionStopped {
		t.Errorf("next request after Stop = %d %s, want 403 %s", r.status, r.body, CodeSessionStopped)
	}
	g := e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:generateContent", "X-Goog-Api-Key", testClientKey, "X-Gatehouse-Session", "agent")
	var ge geminiError
	if err := json.Unmarshal([]byte(g.body), &ge); err != nil {
		t.Fatal(err)
	}
	if g.status != http.StatusForbidden || ge.Error.Status != "PERMISSION_DENIED" || len(ge.Error.Details) == 0 || ge.Error.Details[0].Reason != CodeSessionStopped {
		t.Errorf("Gemini request of the stopped session = %d %s, want 403 in the Gemini shape, reason %s", g.status, g.body, CodeSessionStopped)
	}
	close(hold)
	if r := <-inflight; r.status != http.StatusOK {
		t.Errorf("the request in flight at Stop = %d %s, want 200 (it finishes)", r.status, r.body)
	}
	other := []string{"Authorization", "Bearer " + testClientKey, "X-Gatehouse-Session", "other"}
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), other...); r.status != http.StatusOK {
		t.Errorf("another session of the key = %d %s, want 200", r.status, r.body)
	}
	if in, _ := e.gw.Sessions().Resume(hash); in.State != "ok" {
		t.Errorf("state after Resume = %q, want ok", in.State)
	}
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), hdr...); r.status != http.StatusOK {
		t.Errorf("request after Resume = %d %s, want 200", r.status, r.body)
	}

	e.gw.Sessions().Stop(hash)
	clock.Advance(time.Duration(limits.DefaultAffinityTTLMs) * time.Millisecond)
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), hdr...); r.status != http.StatusOK {
		t.Errorf("request after the affinity TTL idle = %d %s, want 200 (the hold ends)", r.status, r.body)
	}
}
