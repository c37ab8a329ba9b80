package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

func TestCapsHoldEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 15 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5", "glm-4.7")
	c.Overrides = caps(4, map[string]int{"glm-5": 1, "glm-4.7": 3}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	var wg sync.WaitGroup
	statuses := make([]int, 50)
	for i := range 50 {
		model := "glm-5"
		if i%2 == 1 {
			model = "glm-4.7"
		}
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody(model, false)).status })
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i, s)
		}
	}
	st := e.up.Stats()
	if got := e.up.Peak("key-c1", "glm-5"); got != 1 {
		t.Errorf("upstream peak for glm-5 = %d, want 1", got)
	}
	if got := e.up.Peak("key-c1", "glm-4.7"); got < 1 || got > 3 {
		t.Errorf("upstream peak for glm-4.7 = %d, want 1..3", got)
	}
	if got := st.ByKey["key-c1"].Peak; got > 4 {
		t.Errorf("upstream peak for the connection = %d, want <= 4", got)
	}
	waitFor(t, time.Second, "all gates idle", e.allGatesIdle)
}

func TestShortWaitRejectsExcessWithModelGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 400 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5")
	c.Overrides = caps(4, map[string]int{"glm-5": 1}, 30)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	var wg sync.WaitGroup
	replies := make([]reply, 8)
	for i := range replies {
		wg.Go(func() { replies[i] = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) })
	}
	wg.Wait()
	var ok, rejected int
	for _, r := range replies {
		switch r.status {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			rejected++
			if code := r.errorCode(t); code != "SEMAPHORE_TIMEOUT" {
				t.Errorf("429 code = %q, want SEMAPHORE_TIMEOUT", code)
			}
			if got, want := r.header.Get(HeaderGate), "model:c1:glm-5"; got != want {
				t.Errorf("%s = %q, want %q", HeaderGate, got, want)
			}
			if n, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || n < 1 {
				t.Errorf("Retry-After = %q, want whole seconds >= 1", r.header.Get("Retry-After"))
			}
		default:
			t.Errorf("unexpected status %d: %s", r.status, r.body)
		}
	}
	if ok != 1 || rejected != 7 {
		t.Errorf("got %d ok and %d rejected, want 1 and 7", ok, rejected)
	}
	if got := e.up.Peak("key-c1", "glm-5"); got != 1 {
		t.Errorf("upstream peak = %d, want 1", got)
	}
}

func TestApplyChangesCapsLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 250 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)
	gateKey := "model:c1:glm-5"

	// Raise 1 → 3 while five requests wait.
	statuses := make([]int, 6)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)).status })
	}
	waitFor(t, 5*time.Second, "one in flight, five queued", func() bool {
		g := e.gate(gateKey)
		return g.InFlight == 1 && g.Queued == 5
	})
	c.Overrides.ModelConcurrency = map[string]int{"glm-5": 3}
	e.gw.Apply(Config{Connections: []Connection{c}})
	if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByModel["glm-5"].InFlight == 3 }); err != nil {
		t.Fatalf("upstream never reached 3 in flight after raising the cap: %v", err)
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d: status %d", i, s)
		}
	}
	if got := e.up.Peak("key-c1", "glm-5"); got != 3 {
		t.Errorf("peak after raising = %d, want 3", got)
	}

	// Lower 3 → 1 while three run and three wait: in-flight may only fall
	// until below the new cap, then never rise above 1.
	e.up.Reset()
	for i := range statuses {
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)).status })
	}
	waitFor(t, 5*time.Second, "three in flight, three queued", func() bool {
		g := e.gate(gateKey)
		return g.InFlight == 3 && g.Queued == 3
	})
	if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByModel["glm-5"].InFlight == 3 }); err != nil {
		t.Fatalf("three admitted requests never reached the upstream: %v", err)
	}
	c.Overrides.ModelConcurrency = map[string]int{"glm-5": 1}
	e.gw.Apply(Config{Connections: []Connection{c}})
	prev, worst := 3, 0
	err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool {
		cur := st.ByModel["glm-5"].InFlight
		if cur > prev && cur > worst {
			worst = cur
		}
		prev = cur
		return st.ByModel["glm-5"].Requests == 6 && cur == 0
	})
	if err != nil {
		t.Fatalf("waiting for the queue to drain: %v", err)
	}
	wg.Wait()
	if worst > 1 {
		t.Errorf("after lowering the cap to 1, upstream in-flight rose to %d", worst)
	}
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d after lowering: status %d", i, s)
		}
	}
}

func TestRoutingAliasBareAndUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 20 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	ctx := testCtx(t)

	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		model := "zai/glm-5"
		if i%2 == 0 {
			model = "glm-5"
		}
		wg.Go(func() { statuses[i] = e.post(ctx, "/v1/chat/completions", chatBody(model, false)).status })
	}
	wg.Wait()
	if diff := cmp.Diff([]int{200, 200, 200, 200, 200, 200}, statuses); diff != "" {
		t.Errorf("statuses mismatch (-want +got):\n%s", diff)
	}
	if got := e.up.Requests("key-c1", "glm-5"); got != 6 {
		t.Errorf("upstream saw %d requests for glm-5, want 6 (alias rewritten)", got)
	}
	if got := e.up.Requests("key-c1", "zai/glm-5"); got != 0 {
		t.Errorf("upstream saw the alias %d times", got)
	}
	if got := e.up.Peak("key-c1", "glm-5"); got != 1 {
		t.Errorf("peak = %d, want 1: alias and bare id share the glm-5 cap", got)
	}

	tests := []struct {
		name, path, body, wantShape string
	}{
		{name: "openai", path: "/v1/chat/completions", body: chatBody("nope", false), wantShape: "openai"},
		{name: "anthropic", path: "/v1/messages", body: `{"model":"glm-5","max_tokens":5,"messages":[]}`, wantShape: "anthropic"},
		{name: "unknown provider", path: "/v1/chat/completions", body: chatBody("other/glm-5", false), wantShape: "openai"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(ctx, tc.path, tc.body)
			if r.status != http.StatusNotFound {
				t.Fatalf("status %d, want 404: %s", r.status, r.body)
			}
			checkShape(t, r, tc.wantShape, "MODEL_NOT_FOUND")
		})
	}
}

// checkShape asserts the error body is in the given API's shape with code.
func checkShape(t *testing.T, r reply, shape, code string) {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &raw); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	var eb errorBody
	_ = json.Unmarshal([]byte(r.body), &eb)
	switch shape {
	case "openai":
		if _, ok := raw["type"]; ok || eb.Error.Message == "" || eb.Error.Type == "" {
			t.Errorf("not an OpenAI error shape: %s", r.body)
		}
	case "anthropic":
		if eb.Type != "error" || eb.Error.Message == "" || eb.Error.Type == "" {
			t.Errorf("not an Anthropic error shape: %s", r.body)
		}
	}
	if eb.Error.Code != code {
		t.Errorf("error.code = %q, want %q", eb.Error.Code, code)
	}
}

func TestClientKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	oa := e.conn("oa", "upstream-openai-key", "glm-5")
	an := e.conn("an", "upstream-anthropic-key", "claude-x")
	an.APIStyle, an.Provider = "anthropic", "anthropic"
	e.gw.Apply(Config{Connections: []Connection{oa, an}})
	ctx := testCtx(t)
	msgBody := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`

	tests := []struct {
		name, path, body, shape, code string
		auth                          []string // header, value
	}{
		{name: "openai missing", path: "/v1/chat/completions", body: chatBody("glm-5", false), shape: "openai", code: CodeMissingKey, auth: []string{"Authorization", ""}},
		{name: "openai wrong", path: "/v1/chat/completions", body: chatBody("glm-5", false), shape: "openai", code: CodeInvalidKey, auth: []string{"Authorization", "Bearer wrong"}},
		{name: "anthropic missing", path: "/v1/messages", body: msgBody, shape: "anthropic", code: CodeMissingKey, auth: []string{"Authorization", ""}},
		{name: "anthropic wrong x-api-key", path: "/v1/messages", body: msgBody, shape: "anthropic", code: CodeInvalidKey, auth: []string{"Authorization", "", "X-Api-Key", "wrong"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(ctx, tc.path, tc.body, tc.auth...)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", r.status)
			}
			checkShape(t, r, tc.shape, tc.code)
		})
	}
	if n := e.up.Stats().Total.Requests; n != 0 {
		t.Fatalf("upstream got %d requests from unauthenticated clients", n)
	}

	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
		t.Fatalf("openai with key: %d %s", r.status, r.body)
	}
	r := e.post(ctx, "/v1/messages", msgBody, "Authorization", "", "X-Api-Key", testClientKey, "Anthropic-Version", "2023-06-01")
	if r.status != http.StatusOK {
		t.Fatalf("anthropic with x-api-key: %d %s", r.status, r.body)
	}
	if got := r.header.Get(HeaderConnection); got != "conn-an" {
		t.Errorf("%s = %q, want conn-an", HeaderConnection, got)
	}
	if e.up.SawKey(testClientKey) {
		t.Error("upstream saw the client's key")
	}
	for _, k := range []string{"upstream-openai-key", "upstream-anthropic-key"} {
		if !e.up.SawKey(k) {
			t.Errorf("upstream never saw connection key %s", k)
		}
	}
}

func TestModelsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	a := e.conn("a", "ka", "glm-5", "glm-4.7")
	b := e.conn("b", "kb", "gpt-x")
	b.Provider = "openai"
	off := e.conn("off", "ko", "hidden")
	off.Enabled = false
	e.gw.Apply(Config{Connections: []Connection{a, b, off}})
	req, _ := http.NewRequestWithContext(testCtx(t), http.MethodGet, e.gwURL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testClientKey)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	want := []string{"glm-4.7", "glm-5", "gpt-x", "openai/gpt-x", "zai/glm-4.7", "zai/glm-5"}
	if diff := cmp.Diff(want, ids); diff != "" || list.Object != "list" {
		t.Errorf("models mismatch (-want +got):\n%s (object %q)", diff, list.Object)
	}
}

// GET /v1/models/{id} (the SDKs' models.retrieve) answers one entry of the list, by
// either name; a model no enabled connection serves is 404 MODEL_NOT_FOUND.
func TestModelRetrieve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	off := e.conn("off", "ko", "hidden")
	off.Enabled = false
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "glm-5"), off}})
	tests := []struct {
		name, method, path string
		status             int
		wantID, wantCode   string
	}{
		{name: "bare id", method: "GET", path: "/v1/models/glm-5", status: 200, wantID: "glm-5"},
		{name: "provider/model", method: "GET", path: "/v1/models/zai/glm-5", status: 200, wantID: "zai/glm-5"},
		{name: "escaped slash", method: "GET", path: "/v1/models/zai%2Fglm-5", status: 200, wantID: "zai/glm-5"},
		{name: "head", method: "HEAD", path: "/v1/models/glm-5", status: 200},
		{name: "disabled connection's model", method: "GET", path: "/v1/models/hidden", status: 404, wantCode: CodeModelNotFound},
		{name: "unknown", method: "GET", path: "/v1/models/nope", status: 404, wantCode: CodeModelNotFound},
		{name: "post", method: "POST", path: "/v1/models/glm-5", status: 405, wantCode: CodeMethodNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testCtx(t), tc.method, e.gwURL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+testClientKey)
			resp, err := e.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			var doc struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				OwnedBy string `json:"owned_by"`
				Error   struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if len(body) > 0 {
				if err := json.Unmarshal(body, &doc); err != nil {
					t.Fatalf("body %q: %v", body, err)
				}
			}
			switch {
			case tc.wantID != "" && (doc.ID != tc.wantID || doc.Object != "model" || doc.OwnedBy != "zai"):
				t.Errorf("model = %+v, want id %q, object model, owned_by zai", doc, tc.wantID)
			case tc.wantCode != "" && doc.Error.Code != tc.wantCode:
				t.Errorf("error code %q, want %q: %s", doc.Error.Code, tc.wantCode, body)
			case tc.method == "HEAD" && len(body) != 0:
				t.Errorf("HEAD answered a body: %q", body)
			}
		})
	}
}

func TestNotReadyAndBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	ctx := testCtx(t)
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusServiceUnavailable {
		t.Errorf("before Apply: status %d, want 503", r.status)
	}
	if ok, _ := e.gw.Loaded(); ok {
		t.Error("Loaded before Apply")
	}
	e.gw.Apply(Config{Connections: []Connection{e.conn("c", "k", "glm-5")}})
	if ok, at := e.gw.Loaded(); !ok || at.IsZero() {
		t.Error("not Loaded after Apply")
	}
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{name: "not json", body: `nope`, status: 400, code: CodeInvalidRequest},
		{name: "no model", body: `{"messages":[]}`, status: 400, code: CodeInvalidRequest},
		{name: "model not a string", body: `{"model":5}`, status: 400, code: CodeInvalidRequest},
		{name: "two models", body: `{"model":"glm-5","model":"x"}`, status: 400, code: CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(ctx, "/v1/chat/completions", tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			checkShape(t, r, "openai", tc.code)
		})
	}
}

// readEvents reads an SSE body and reports the data lines.
func sseData(body string) []string {
	var out []string
	for line := range strings.SplitSeq(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestExecutionBoundBeforeHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 5 * time.Second})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = limits.Overrides{ExecutionMaxWaitMs: ptr(150), ModelConcurrency: map[string]int{"glm-5": 1}}
	e.gw.Apply(Config{Connections: []Connection{c}})
	for _, stream := range []bool{false, true} {
		r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", stream))
		if r.status != http.StatusGatewayTimeout {
			t.Fatalf("stream=%v: status %d, want 504: %s", stream, r.status, r.body)
		}
		checkShape(t, r, "openai", CodeExecutionTimeout)
		waitFor(t, time.Second, "permit released", func() bool { return e.gate("model:c1:glm-5").InFlight == 0 })
	}
}

func TestContextCancelledWhileQueuedLeavesQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 300 * time.Millisecond})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	cancel, first, queued := e.holdAndQueue(t)
	cancel()
	waitFor(t, time.Second, "queue empty after cancel", func() bool { return e.gate("model:c1:glm-5").Queued == 0 })
	<-queued
	<-first
	if got := e.up.Requests("k1", "glm-5"); got != 1 {
		t.Errorf("upstream got %d requests, want 1 (the cancelled one never dispatched)", got)
	}
}

// holdAndQueue sends a glm-5 request that takes the only slot of model:c1:glm-5 and,
// once it is in flight, a second one that queues behind it. cancel makes the queued
// request's client leave; first and queued close when each request has ended.
func (e *env) holdAndQueue(t *testing.T) (cancel context.CancelFunc, first, queued <-chan struct{}) {
	t.Helper()
	ctx := testCtx(t)
	firstDone := make(chan struct{})
	go func() {
		defer close(firstDone)
		e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	}()
	waitFor(t, 2*time.Second, "first in flight", func() bool { return e.gate("model:c1:glm-5").InFlight == 1 })
	qctx, cancel := context.WithCancel(ctx)
	queuedDone := make(chan struct{})
	go func() {
		defer close(queuedDone)
		req, _ := http.NewRequestWithContext(qctx, http.MethodPost, e.gwURL+"/v1/chat/completions", strings.NewReader(chatBody("glm-5", false)))
		req.Header.Set("Authorization", "Bearer "+testClientKey)
		if resp, err := e.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, 2*time.Second, "second queued", func() bool { return e.gate("model:c1:glm-5").Queued == 1 })
	return cancel, firstDone, queuedDone
}

func TestEqualPrioritiesShareLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	hi := e.conn("hi", "k-hi", "glm-5")
	hi.Priority, hi.Enabled = 5, false
	var conns []Connection
	for _, id := range []string{"x", "y", "z"} {
		conns = append(conns, e.conn(id, "k-"+id, "glm-5"))
	}
	e.gw.Apply(Config{Connections: append(conns, hi)})
	ctx := testCtx(t)
	for range 30 {
		if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
			t.Fatalf("status %d", r.status)
		}
	}
	got := map[string]int64{}
	for _, id := range []string{"x", "y", "z", "hi"} {
		got[id] = e.up.Requests("k-"+id, "glm-5")
	}
	if diff := cmp.Diff(map[string]int64{"x": 10, "y": 10, "z": 10, "hi": 0}, got); diff != "" {
		t.Errorf("requests per connection mismatch (-want +got):\n%s", diff)
	}
}

// An uncapped connection's gate keeps its counters (and wait histogram, the overview's
// p50/p99) across config reloads, like a capped one.
func TestUncappedGateCountersSurviveApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	cfg := Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}}
	e.gw.Apply(cfg)
	for range 2 {
		if r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false)); r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	e.gw.Apply(cfg)
	if g := e.gate("connection:c1"); g.Admitted != 2 || g.Waits.Count() != 2 {
		t.Errorf("connection:c1 after a reload: admitted %d, waits counted %d; want 2 and 2", g.Admitted, g.Waits.Count())
	}
}
