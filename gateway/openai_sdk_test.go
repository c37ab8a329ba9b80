package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// openaiVersion is the openai (npm) release TestOpenAISDKRateLimitHeaders
// runs: the newest that supports Node 20 (7.x needs Node 22).
const openaiVersion = "6.49.0"

// sdkCall is what testdata/openai/sdk.mjs reports of one call.
type sdkCall struct {
	Stream  bool              `json:"stream"`
	Status  int               `json:"status"`
	Text    string            `json:"text"`
	Name    string            `json:"name"`
	Headers map[string]string `json:"headers"`
}

// TestOpenAISDKRateLimitHeaders runs the official OpenAI SDK against
// Gatehouse over real HTTP, as a client key with an rpm, a tpm and a tpd of
// 150 tokens (the fake upstream charges 30 a request): through
// response.headers (.withResponse()) it reads X-RateLimit-Remaining-Requests
// (0 or 1: the rpm is a spacing) over five calls (one streamed), the limits and
// OpenAI-form resets, X-RateLimit-Remaining-Tokens falling 150, 120, 90, 60,
// 30 as the tpd is charged (the tighter budget), and X-Gatehouse-Queue-Ms;
// the sixth call, past the tpd, is the SDK's RateLimitError (429), whose
// headers it reads too.
//
// Not parallel, like TestGenAISDK: node's start-up takes a core for seconds.
func TestOpenAISDKRateLimitHeaders(t *testing.T) {
	dir, node := nodePackage(t, "openai", "openai", openaiVersion)
	const rpm, tpd = 600000, 150
	keys := map[string]ClientKey{}
	for i := range 3 {
		keys[fmt.Sprintf("sk-sdk-%d-0000000000", i)] = ClientKey{ID: fmt.Sprintf("k%d", i), Name: fmt.Sprintf("sdk-%d", i), Enabled: true,
			Limits: limits.ClientKeyLimits{RPM: ptr(rpm), TPM: ptr(int64(100000)), TPD: ptr(int64(tpd))}}
	}
	e := newEnv(t, upstreamtest.Options{Chunks: 3}, withKeys(keys))
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, ClientKeys: keyConfig(keys)})

	var got struct {
		Calls   []sdkCall `json:"calls"`
		Refused sdkCall   `json:"refused"`
	}
	// A run that crosses a minute boundary sees the rpm window restart: run
	// again as a fresh key.
	for attempt := 0; ; attempt++ {
		minute := time.Now().Truncate(time.Minute)
		out := runOpenAISDK(t, node, dir, e.gwURL, fmt.Sprintf("sk-sdk-%d-0000000000", attempt))
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("SDK output %q: %v", out, err)
		}
		if time.Now().Truncate(time.Minute).Equal(minute) || attempt == 2 {
			break
		}
	}
	t.Logf("SDK saw: %+v", got)
	if len(got.Calls) != 5 {
		t.Fatalf("SDK made %d calls, want 5", len(got.Calls))
	}
	var tokens []int64
	for i, c := range got.Calls {
		h := c.Headers
		if c.Status != 200 || c.Text == "" || c.Stream != (i == 3) {
			t.Errorf("call %d: status %d, text %q, stream %v", i+1, c.Status, c.Text, c.Stream)
		}
		// rpm is a spacing (a turn every 100 µs): 1 left when the next turn
		// has come by the time the answer is written, else 0.
		if left := h["x-ratelimit-remaining-requests"]; h["x-ratelimit-limit-requests"] != strconv.Itoa(rpm) || (left != "0" && left != "1") {
			t.Errorf("call %d: requests limit %q remaining %q, want %d and 0 or 1", i+1,
				h["x-ratelimit-limit-requests"], left, rpm)
		}
		if h["x-ratelimit-limit-tokens"] != strconv.Itoa(tpd) {
			t.Errorf("call %d: token limit %q, want the tpd %d (the tighter budget)", i+1, h["x-ratelimit-limit-tokens"], tpd)
		}
		for _, name := range []string{"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"} {
			if !openAIResetForm.MatchString(h[name]) {
				t.Errorf("call %d: %s = %q, not in OpenAI's form", i+1, name, h[name])
			}
		}
		if _, err := strconv.Atoi(h["x-gatehouse-queue-ms"]); err != nil {
			t.Errorf("call %d: x-gatehouse-queue-ms %q", i+1, h["x-gatehouse-queue-ms"])
		}
		n, err := strconv.ParseInt(h["x-ratelimit-remaining-tokens"], 10, 64)
		if err != nil {
			t.Fatalf("call %d: x-ratelimit-remaining-tokens %q", i+1, h["x-ratelimit-remaining-tokens"])
		}
		tokens = append(tokens, n)
	}
	if want := []int64{150, 120, 90, 60, 30}; !slices.Equal(tokens, want) {
		t.Errorf("remaining tokens %v, want %v (the previous answers' usage charged)", tokens, want)
	}
	r := got.Refused
	if r.Status != 429 || r.Name != "RateLimitError" || r.Headers["x-ratelimit-limit-tokens"] != strconv.Itoa(tpd) ||
		r.Headers["x-ratelimit-remaining-tokens"] != "0" || r.Headers["x-ratelimit-remaining-requests"] == "" {
		t.Errorf("sixth call: %+v, want the SDK's RateLimitError (429) with the key's headers, 0 tokens left", r)
	}
}

// runOpenAISDK runs testdata/openai/sdk.mjs as client key secret against
// the gateway at gwURL and returns what it printed.
func runOpenAISDK(t *testing.T, node, dir, gwURL, secret string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "openai", "sdk.mjs"))
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "OPENAI_BASE_URL="+gwURL+"/v1", "OPENAI_API_KEY="+secret,
		"OPENAI_DIR="+dir, "OPENAI_MODEL=glm-5")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node testdata/openai/sdk.mjs: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	return out
}
