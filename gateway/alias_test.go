package gateway

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestAliasRouting is issue 26's alias "done when": with fast=zai/glm-5, a
// request for fast reaches glm-5 on the zai connection (not on another
// provider's glm-5, though that one is preferred for glm-5 itself), waits at
// glm-5's gate on zai, is allowed by a key with zai/*, refused to a key
// without; an alias works on a Gemini path too.
func TestAliasRouting(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-zai-0000000000000": {ID: "kz", Name: "zai-fleet", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"zai/*"}}},
		"sk-other-00000000000": {ID: "ko", Name: "other-fleet", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"openrouter/*"}}},
		testClientKey:          {ID: "test-key", Name: "test", Enabled: true},
	}
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), func(o *Options) { o.RequestLog = log })
	zai := e.conn("c1", "zai-key", "glm-5")
	zai.Overrides = caps(0, map[string]int{"glm-5": 1}, 30000)
	other := e.conn("c2", "openrouter-key", "glm-5")
	other.Provider, other.Priority = "openrouter", 10
	e.gw.Apply(Config{
		Settings:    limits.Settings{Aliases: map[string]string{"fast": "zai/glm-5", "flash": "gemini-x"}},
		Connections: []Connection{zai, other, e.geminiConn("g1", "google-key", "gemini-x")},
		ClientKeys:  keyConfig(keys),
	})
	ctx := testCtx(t)

	r := e.post(ctx, "/v1/chat/completions", chatBody("fast", false), as("sk-zai-0000000000000")...)
	if r.status != http.StatusOK || r.header.Get(HeaderConnection) != "conn-c1" {
		t.Fatalf("fast = %d via %q %s, want 200 via conn-c1", r.status, r.header.Get(HeaderConnection), r.body)
	}
	if got := e.up.Requests("zai-key", "glm-5"); got != 1 {
		t.Errorf("zai's glm-5 got %d requests, want 1 (the body's model rewritten to the target)", got)
	}
	if got := e.up.Requests("zai-key", "fast"); got != 0 {
		t.Errorf("the upstream was asked for %q %d times", "fast", got)
	}
	// The record is written as the handler ends, maybe after the client read the answer.
	waitFor(t, 5*time.Second, "the request's record", func() bool { return len(log.all()) == 1 })
	if recs := log.all(); len(recs) != 1 || recs[0].Model != "fast" || recs[0].UpstreamModel != "glm-5" || recs[0].Provider != "zai" {
		t.Errorf("request log %+v, want one record with model fast, upstream model glm-5 on zai", recs)
	}
	r = e.post(ctx, "/v1/chat/completions", chatBody("fast", false), as("sk-other-00000000000")...)
	if r.status != http.StatusForbidden || r.errorCode(t) != CodeModelNotAllowed {
		t.Errorf("fast for a key without zai = %d %s, want 403 MODEL_NOT_ALLOWED", r.status, r.body)
	}

	// fast waits at glm-5's gate on zai: held there, a request for
	// zai/glm-5 queues behind it, and the upstream never sees two.
	hold := make(chan struct{})
	if err := e.up.SetKeyBehavior("zai-key", upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 2)
	go func() {
		done <- e.post(ctx, "/v1/chat/completions", chatBody("fast", false), as("sk-zai-0000000000000")...)
	}()
	waitFor(t, 5*time.Second, "fast holding glm-5's gate", func() bool { return e.gate("model:c1:glm-5").InFlight == 1 })
	go func() {
		done <- e.post(ctx, "/v1/chat/completions", chatBody("zai/glm-5", false), as("sk-zai-0000000000000")...)
	}()
	waitFor(t, 5*time.Second, "zai/glm-5 queued behind fast", func() bool { return e.gate("model:c1:glm-5").Queued == 1 })
	close(hold)
	for range 2 {
		if r := <-done; r.status != http.StatusOK {
			t.Errorf("held request = %d %s", r.status, r.body)
		}
	}
	if got := e.up.Peak("zai-key", "glm-5"); got != 1 {
		t.Errorf("zai glm-5 peak = %d, want 1", got)
	}

	// An alias on a Gemini path names the upstream model in the URL.
	if err := e.up.SetDefault(upstreamtest.Behavior{}); err != nil {
		t.Fatal(err)
	}
	g := e.gemini(ctx, http.MethodPost, "/v1beta/models/flash:generateContent")
	if g.status != http.StatusOK || !strings.Contains(g.body, `"modelVersion":"gemini-x"`) {
		t.Errorf("flash on the Gemini route = %d %s", g.status, g.body)
	}
}

// recordedLog is a RequestLog that keeps copies of every record.
type recordedLog struct {
	mu   sync.Mutex
	recs []RequestRecord
}

func (l *recordedLog) Record(r *RequestRecord) {
	l.mu.Lock()
	l.recs = append(l.recs, *r)
	l.mu.Unlock()
}

func (l *recordedLog) all() []RequestRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]RequestRecord(nil), l.recs...)
}
