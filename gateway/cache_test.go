package gateway

import (
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
// and not; a streamed OpenAI chat of a priced model asks the upstream for its
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
	waitFor(t, 5*time.Second, "four records", func() bool { return len(log.all()) == 4 })
	type counts struct{ in, read, write, out, cost int64 }
	want := map[string]counts{"messages": {21004, 20000, 1000, 100, 11262}, "chat": {21000, 20000, 0, 100, 10500}}
	for _, rec := range log.all() {
		got := counts{rec.InputTokens, rec.CachedTokens, rec.CacheWriteTokens, rec.OutputTokens, rec.CostMicros}
		if got != want[rec.Route] {
			t.Errorf("%s stream=%v recorded %+v, want %+v", rec.Route, rec.Stream, got, want[rec.Route])
		}
	}
}
