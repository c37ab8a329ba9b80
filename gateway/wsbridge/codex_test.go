package wsbridge_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
	if peak := r.up.Peak(upstreamKey, freeModel); peak > 2 {
		t.Errorf("upstream peak in flight %d, want ≤ 2", peak)
	}
	checkCodexRun(t, r, outs)
}
