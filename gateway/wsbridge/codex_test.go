package wsbridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// codexBinary is the Codex CLI the Codex tests run: $GATEHOUSE_CODEX
// (scripts/test installs @openai/codex into a cache directory and sets it
// when node and npm are there), else codex on PATH; the tests are skipped,
// saying so, without one.
func codexBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GATEHOUSE_CODEX"); p != "" {
		return p
	}
	p, err := exec.LookPath("codex")
	if err != nil {
		t.Skip("no Codex CLI: set GATEHOUSE_CODEX or put codex on PATH (scripts/test installs @openai/codex when npm is there)")
	}
	return p
}

// codexHome makes a CODEX_HOME pointed at the rig the usual way (Codex's
// default provider, openai_base_url) and logs in with the client key.
func codexHome(ctx context.Context, t *testing.T, bin string, r *rig) []string {
	t.Helper()
	home := t.TempDir()
	cfg := "openai_base_url = \"" + r.srv.URL + "/v1\"\nmodel = \"" + freeModel + "\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "NO_COLOR=1"}
	login := exec.CommandContext(ctx, bin, "login", "--with-api-key")
	login.Env, login.Stdin = env, strings.NewReader(codexKey+"\n")
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("codex login: %v\n%s", err, out)
	}
	return env
}

// codexExec runs one `codex exec` task and returns its output.
func codexExec(ctx context.Context, t *testing.T, bin string, env []string, task string) string {
	work := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "exec", "--skip-git-repo-check", task)
	cmd.Env, cmd.Dir = env, work
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("codex exec %q: %v\n%s", task, err, out)
	}
	return string(out)
}

// checkCodexRun checks what the rig saw of Codex runs: sockets opened, no
// WebSocket failure in any output, and one 200 request-log row per turn
// the upstream answered, none of them a 405.
func checkCodexRun(t *testing.T, r *rig, outputs []string) {
	t.Helper()
	for _, out := range outputs {
		// The temp dirs Codex names carry the test's name.
		low := strings.ReplaceAll(strings.ToLower(out), strings.ToLower(t.Name()), "")
		if strings.Contains(low, "websocket") || strings.Contains(low, "method not allowed") ||
			strings.Contains(low, "405 ") || strings.Contains(low, "reconnecting") {
			t.Errorf("codex output mentions a WebSocket failure:\n%s", out)
		}
	}
	if r.upgrade.Load() < int64(len(outputs)) {
		t.Errorf("%d WebSocket upgrades for %d codex runs: Codex fell back to HTTP", r.upgrade.Load(), len(outputs))
	}
	turns := int(r.up.Requests(upstreamKey, freeModel))
	waitFor(t, "a row per turn", func() bool { return len(r.log.all()) >= turns })
	responses := 0
	for _, row := range r.log.all() {
		if row.Status == http.StatusMethodNotAllowed {
			t.Errorf("405 row in the request log: %+v", row)
		}
		if row.Route == "responses" {
			responses++
			if row.Status != http.StatusOK {
				t.Errorf("turn row %+v: want 200", row)
			}
		}
	}
	if turns < len(outputs) || responses != turns {
		t.Errorf("%d responses rows for %d upstream turns (%d runs): want one row per turn", responses, turns, len(outputs))
	}
}

// The real Codex CLI with its default provider pointed at Gatehouse: `codex
// exec` opens the Responses WebSocket, finishes with no WebSocket failure,
// and each turn is one request-log row.
func TestCodexExecOverWebSocket(t *testing.T) {
	bin := codexBinary(t)
	r := newRig(t, rigOptions{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	env := codexHome(ctx, t, bin, r)
	out := codexExec(ctx, t, bin, env, "Say hello.")
	if !strings.Contains(out, "Hello from the fake upstream") {
		t.Errorf("codex output lacks the upstream's answer:\n%s", out)
	}
	checkCodexRun(t, r, []string{out})
}

// Four Codex agents at once on WebSockets through a connection capped at 2:
// every task finishes, the upstream never sees more than 2, the request log
// has every turn.
func TestCodexFourAgentsThroughCapOfTwo(t *testing.T) {
	bin := codexBinary(t)
	r := newRig(t, rigOptions{maxConcurrent: 2, up: upstreamtest.Options{ChunkInterval: 20 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	env := codexHome(ctx, t, bin, r)
	outs := make([]string, 4)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() { outs[i] = codexExec(ctx, t, bin, env, "Say hello.") })
	}
	wg.Wait()
	for i, out := range outs {
		if !strings.Contains(out, "Hello from the fake upstream") {
			t.Errorf("agent %d did not finish with the upstream's answer:\n%s", i, out)
		}
	}
	if peak := r.out.peak.Load(); peak > 2 {
		t.Errorf("upstream requests outstanding at once: %d, want ≤ 2", peak)
	}
	checkCodexRun(t, r, outs)
}

// toolUpstream is a Responses API upstream that answers a request without a
// tool result with a call of Codex's exec_command tool, and one with a
// tool result with a text message; it keeps every request body.
type toolUpstream struct {
	mu     sync.Mutex
	bodies [][]byte
	n      int
}

func (u *toolUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.n++
	id := "resp_tool" + strconv.Itoa(u.n)
	u.mu.Unlock()
	var req struct {
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &req)
	answered := false
	for _, it := range req.Input {
		answered = answered || it.Type == "function_call_output"
	}
	item := `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"echo gatehouse-tool-ran\"}","status":"completed"}`
	if answered {
		item = `{"type":"message","id":"msg_2","role":"assistant","status":"completed","content":[{"type":"output_text","text":"The command ran through Gatehouse.","annotations":[]}]}`
	}
	w.Header().Set("Content-Type", "text/event-stream")
	resp := func(status, output string) string {
		return `{"id":"` + id + `","object":"response","status":"` + status + `","model":"` + freeModel + `","output":` + output +
			`,"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}}`
	}
	events := []string{
		`{"type":"response.created","sequence_number":0,"response":` + resp("in_progress", "[]") + `}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":` + item + `}`,
		`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":` + item + `}`,
		`{"type":"response.completed","sequence_number":3,"response":` + resp("completed", "["+item+"]") + `}`,
	}
	for _, ev := range events {
		var name struct{ Type string }
		_ = json.Unmarshal([]byte(ev), &name)
		_, _ = io.WriteString(w, "event: "+name.Type+"\ndata: "+ev+"\n\n")
		w.(http.Flusher).Flush()
	}
}

// A Codex task with a tool call through the WebSocket: the call, Codex's
// tool result on the same socket, the answer. The request carrying the
// result reaches the upstream whole — the first request's input, the call
// and its output — with no previous_response_id (which WebSocket mode uses
// to send only the new items, and which an HTTP upstream cannot resolve).
func TestCodexToolCallOverWebSocket(t *testing.T) {
	bin := codexBinary(t)
	up := &toolUpstream{}
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	r := &rig{t: t, log: &requestLog{}, reg: prometheus.NewRegistry()}
	r.gw, r.bridge = newGateway(upSrv.URL, rigOptions{}, r.reg, r.log)
	defer r.gw.Close()
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Upgrade") != "" {
			r.upgrade.Add(1)
		}
		r.bridge.ServeHTTP(w, req)
	}))
	defer r.srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	env := codexHome(ctx, t, bin, r)
	out := codexExec(ctx, t, bin, env, "Run a command.")
	if !strings.Contains(out, "The command ran through Gatehouse.") {
		t.Errorf("codex did not finish with the upstream's answer:\n%s", out)
	}
	up.mu.Lock()
	bodies := up.bodies
	up.mu.Unlock()
	if len(bodies) < 2 {
		t.Fatalf("%d upstream requests, want the call and the result", len(bodies))
	}
	type item struct {
		Type   string `json:"type"`
		Role   string `json:"role"`
		CallID string `json:"call_id"`
	}
	var first, last struct {
		Previous *string `json:"previous_response_id"`
		Stream   bool    `json:"stream"`
		Input    []item  `json:"input"`
	}
	if err := json.Unmarshal(bodies[0], &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(bodies[len(bodies)-1], &last); err != nil {
		t.Fatal(err)
	}
	if last.Previous != nil || !last.Stream {
		t.Errorf("result request: previous_response_id %v, stream %v; want none, true", last.Previous, last.Stream)
	}
	if len(last.Input) < len(first.Input)+2 {
		t.Fatalf("result request has %d input items, want the first request's %d plus the call and its output", len(last.Input), len(first.Input))
	}
	for i, it := range first.Input {
		if last.Input[i] != it {
			t.Errorf("result request item %d = %+v, want the first request's %+v", i, last.Input[i], it)
		}
	}
	var call, output bool
	for _, it := range last.Input[len(first.Input):] {
		call = call || it.Type == "function_call" && it.CallID == "call_1"
		output = output || it.Type == "function_call_output" && it.CallID == "call_1"
	}
	if !call || !output {
		t.Errorf("result request's new items %+v: want the call and its output", last.Input[len(first.Input):])
	}
	checkCodexToolRows(t, r, len(bodies))
}

// checkCodexToolRows checks one 200 responses row per upstream request and
// that Codex used the socket.
func checkCodexToolRows(t *testing.T, r *rig, turns int) {
	t.Helper()
	if r.upgrade.Load() == 0 {
		t.Errorf("no WebSocket upgrade: Codex fell back to HTTP")
	}
	waitFor(t, "a row per turn", func() bool { return len(r.log.all()) >= turns })
	n := 0
	for _, row := range r.log.all() {
		if row.Route == "responses" {
			n++
			if row.Status != http.StatusOK {
				t.Errorf("turn row %+v: want 200", row)
			}
		}
	}
	if n != turns {
		t.Errorf("%d responses rows for %d turns", n, turns)
	}
}
