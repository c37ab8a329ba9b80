package gateway

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/internal/nodetest"
)

// genaiVersion is the @google/genai release TestGenAISDK runs: the newest
// that supports Node 20 (3.x needs Node 22).
const genaiVersion = "2.32.0"

// genaiSDK returns the directory holding the pinned @google/genai SDK and
// node's path (nodePackage).
func genaiSDK(t *testing.T) (dir, node string) {
	t.Helper()
	return nodePackage(t, "@google/genai", "genai", genaiVersion)
}

// nodePackage is nodetest.Package: the pinned npm package pkg, installed once.
func nodePackage(t *testing.T, pkg, short, version string) (dir, node string) {
	t.Helper()
	return nodetest.Package(t, pkg, short, version)
}

// TestGenAISDK runs the official @google/genai SDK, configured as Gemini CLI
// configures it (GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY) with its default
// API version, against Gatehouse over real HTTP: generate, stream and count
// tokens through a gemini connection to the fake upstream, and a 404 the SDK
// reports as one. The upstream sees the stored key only.
//
// Not parallel: node's start-up and JIT take a core for seconds, which the
// package's parallel tests (30 s bounds, 30 MB bodies under -race) should
// not share on a 2-core machine; it runs before they start.
func TestGenAISDK(t *testing.T) {
	dir, node := genaiSDK(t)
	e := newEnv(t, upstreamtest.Options{Chunks: 4, RecordHeaders: true})
	const stored = "stored-upstream-key-0123456789"
	c := e.geminiConn("g1", stored, "gemini-x")
	c.Overrides = caps(0, map[string]int{"gemini-x": 1}, 30000)
	e.gw.Apply(Config{Connections: []Connection{c}})

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "genai", "sdk.mjs"))
	for _, kv := range os.Environ() {
		// The SDK prefers these over GEMINI_API_KEY and the Gemini API.
		if k, _, _ := strings.Cut(kv, "="); k != "GOOGLE_API_KEY" && !strings.HasPrefix(k, "GOOGLE_GENAI_") && !strings.HasPrefix(k, "GOOGLE_CLOUD_") && !strings.HasPrefix(k, "GOOGLE_VERTEX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOOGLE_GEMINI_BASE_URL="+e.gwURL, "GEMINI_API_KEY="+testClientKey,
		"GENAI_DIR="+dir, "GENAI_MODEL=gemini-x")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node testdata/genai/sdk.mjs: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	type usageMeta struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int `json:"thoughtsTokenCount"`
		TotalTokenCount      int `json:"totalTokenCount"`
	}
	var got struct {
		Generate struct {
			Text  string     `json:"text"`
			Usage *usageMeta `json:"usage"`
		} `json:"generate"`
		Stream struct {
			Chunks int        `json:"chunks"`
			Text   string     `json:"text"`
			Usage  *usageMeta `json:"usage"`
		} `json:"stream"`
		CountTokens struct {
			TotalTokens int `json:"totalTokens"`
		} `json:"countTokens"`
		NotFound struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
		} `json:"notFound"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("SDK output %q: %v", out, err)
	}
	const sentence = "Hello from the fake"
	want := usageMeta{PromptTokenCount: 20, CandidatesTokenCount: 7, ThoughtsTokenCount: 3, TotalTokenCount: 30}
	if got.Generate.Text != sentence || got.Generate.Usage == nil || *got.Generate.Usage != want {
		t.Errorf("generate: %+v, want text %q and usage %+v", got.Generate, sentence, want)
	}
	if got.Stream.Chunks != 4 || got.Stream.Text != sentence || got.Stream.Usage == nil || *got.Stream.Usage != want {
		t.Errorf("stream: %+v, want 4 chunks of %q and usage %+v", got.Stream, sentence, want)
	}
	if got.CountTokens.TotalTokens != 20 {
		t.Errorf("countTokens: %+v, want 20", got.CountTokens)
	}
	if got.NotFound.Status != 404 || !strings.Contains(got.NotFound.Message, "no-such-model") {
		t.Errorf("unknown model: %+v, want the SDK's 404 naming the model", got.NotFound)
	}

	var routes []string
	for _, u := range e.up.ReceivedURIs() {
		routes = append(routes, u)
		if strings.Contains(u, "key=") {
			t.Errorf("upstream URI %q carries a key", u)
		}
	}
	wantRoutes := "/v1beta/models/gemini-x:generateContent /v1beta/models/gemini-x:streamGenerateContent?alt=sse /v1beta/models/gemini-x:countTokens"
	if strings.Join(routes, " ") != wantRoutes {
		t.Errorf("upstream requests %q, want %q", routes, wantRoutes)
	}
	if e.up.SawKey(testClientKey) {
		t.Error("the client key reached the upstream")
	}
	if key, _ := e.up.LastKey("gemini-x"); key != stored {
		t.Errorf("upstream key %q, want the stored one", key)
	}
}
