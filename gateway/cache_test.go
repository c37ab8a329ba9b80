package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestPromptCacheRecorded: the request log's record of an answer with
// prompt-cache counts holds every input token processed, the reads, the
// writes and the cost at the model's price, Anthropic and OpenAI, streamed
// and not, and Gemini; a streamed OpenAI chat of a priced model asks the upstream for its
// usage though no limit counts tokens, and the client does not get the usage
// chunk it did not ask for.
func TestPromptCacheRecorded(t *testing.T) {
	t.Parallel()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	price := limits.Price{Input: new(limits.Micros(3_000_000)), Output: new(limits.Micros(15_000_000)),
		CachedInput: new(limits.Micros(300_000)), CacheWrite: new(limits.Micros(3_750_000))}
	an := e.conn("an", "k-anthropic", "claude-x")
	an.APIStyle, an.Provider = "anthropic", "anthropic"
	oa := e.conn("oa", "k-openai", "gpt-x")
	e.gw.Apply(Config{Connections: []Connection{an, oa},
		Settings: limits.Settings{Prices: limits.Prices{"claude-x": price, "gpt-x": price}}})
	e.mustBehave("k-anthropic", upstreamtest.Behavior{Cache: &upstreamtest.CacheUsage{Input: 4, CacheRead: 20000, CacheWrite: 1000, Output: 100}})
	e.mustBehave("k-openai", upstreamtest.Behavior{Cache: &upstreamtest.CacheUsage{Input: 1000, CacheRead: 20000, Output: 100}})

	ctx := testCtx(t)
	for _, stream := range []bool{false, true} {
		s := "false"
		if stream {
			s = "true"
		}
		if r := e.post(ctx, "/v1/messages", `{"model":"claude-x","max_tokens":100,"stream":`+s+`,"messages":[{"role":"user","content":"hi"}]}`); r.status != http.StatusOK {
			t.Fatalf("messages stream=%v: %d %s", stream, r.status, r.body)
		}
		r := e.post(ctx, "/v1/chat/completions", chatBody("gpt-x", stream))
		if r.status != http.StatusOK {
			t.Fatalf("chat stream=%v: %d %s", stream, r.status, r.body)
		}
		if stream && strings.Contains(r.body, `"prompt_tokens"`) {
			t.Errorf("the client got the usage chunk it did not ask for:\n%s", r.body)
		}
	}
	// Gemini: cachedContentTokenCount is part of promptTokenCount.
	g := e.geminiConn("g1", "k-gemini", "gemini-x")
	e.gw.Apply(Config{Connections: []Connection{an, oa, g},
		Settings: limits.Settings{Prices: limits.Prices{"claude-x": price, "gpt-x": price, "gemini-x": price}}})
	e.mustBehave("k-gemini", upstreamtest.Behavior{Cache: &upstreamtest.CacheUsage{Input: 1000, CacheRead: 20000, Output: 100}})
	if r := e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-x:generateContent"); r.status != http.StatusOK {
		t.Fatalf("gemini: %d %s", r.status, r.body)
	}
	waitFor(t, 5*time.Second, "five records", func() bool { return len(log.all()) == 5 })
	type counts struct{ in, read, write, out, cost int64 }
	want := map[string]counts{"messages": {21004, 20000, 1000, 100, 11262}, "chat": {21000, 20000, 0, 100, 10500},
		"gemini": {21000, 20000, 0, 100, 10500}}
	for _, rec := range log.all() {
		got := counts{rec.InputTokens, rec.CachedTokens, rec.CacheWriteTokens, rec.OutputTokens, rec.CostMicros}
		if got != want[rec.Route] {
			t.Errorf("%s stream=%v recorded %+v, want %+v", rec.Route, rec.Stream, got, want[rec.Route])
		}
	}
}

// TestPromptCacheKeyTPDPerStyle: a key's tpd is charged what the style's own
// limits count — an Anthropic turn of 4 uncached, 20 000 read, 1 000 written
// and 100 out tokens counts 1 104 (input − reads + output), an OpenAI turn of
// 21 000 prompt tokens and 100 out counts 21 100 — and an Anthropic stream
// cut after message_start (its cache counts seen, its end not) leaves the
// key's whole reservation charged, not the partial count.
func TestPromptCacheKeyTPDPerStyle(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{"sk-t": {ID: "kt", Name: "agent", Enabled: true, Limits: limits.ClientKeyLimits{TPD: ptr(int64(30000))}}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	an := e.conn("an", "k-anthropic", "claude-x")
	an.APIStyle, an.Provider = "anthropic", "anthropic"
	e.gw.Apply(Config{Connections: []Connection{an, e.conn("oa", "k-openai", "gpt-x")}, ClientKeys: keyConfig(keys)})
	claude := upstreamtest.CacheUsage{Input: 4, CacheRead: 20000, CacheWrite: 1000, Output: 100}
	e.mustBehave("k-anthropic", upstreamtest.Behavior{Cache: &claude})
	e.mustBehave("k-openai", upstreamtest.Behavior{Cache: &upstreamtest.CacheUsage{Input: 1000, CacheRead: 20000, Output: 100}})
	ctx := testCtx(t)
	left := func() int64 {
		t.Helper()
		r := e.send(ctx, http.MethodGet, "/v1/gatehouse/limits", "", as("sk-t")...)
		var v struct {
			Budgets map[string]struct {
				Remaining int64 `json:"remaining"`
			} `json:"budgets"`
		}
		if err := json.Unmarshal([]byte(r.body), &v); err != nil || r.status != http.StatusOK {
			t.Fatalf("GET /v1/gatehouse/limits = %d %s (%v)", r.status, r.body, err)
		}
		return v.Budgets["tpd"].Remaining
	}
	body := func(stream bool) string {
		return fmt.Sprintf(`{"model":"claude-x","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
	}

	for i, stream := range []bool{false, true} {
		if r := e.post(ctx, "/v1/messages", body(stream), as("sk-t")...); r.status != http.StatusOK {
			t.Fatalf("messages stream=%v: %d %s", stream, r.status, r.body)
		}
		want := int64(30000 - (i+1)*1104)
		waitFor(t, 5*time.Second, fmt.Sprintf("anthropic rule: %d left after turn %d", want, i+1), func() bool { return left() == want })
	}
	if r := e.post(ctx, "/v1/chat/completions", chatBodyMax("gpt-x", 100), as("sk-t")...); r.status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	afterOpenAI := int64(30000 - 2*1104 - 21100)
	waitFor(t, 5*time.Second, fmt.Sprintf("openai rule: %d left", afterOpenAI), func() bool { return left() == afterOpenAI })

	e.mustBehave("k-anthropic", upstreamtest.Behavior{Cache: &claude, Fail: upstreamtest.FailStreamCut, Chunks: 8})
	cut := body(true)
	_ = e.post(ctx, "/v1/messages", cut, as("sk-t")...)
	estimate := int64((len(cut)+3)/4 + 100)
	want := afterOpenAI - estimate
	// The reservation is charged before dispatch: only once the request is
	// over (its permit released, its settlement made) does the figure say
	// that it stayed.
	waitFor(t, 5*time.Second, "the cut stream's request to end", e.allGatesIdle)
	if got := left(); got != want {
		t.Errorf("after the cut stream %d left, want %d: the whole reservation of %d stays charged", got, want, estimate)
	}
}
