package gateway

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestKeyPacingHoldsNoSlot: a key waiting for its own rpm turn holds no
// slot of a shared connection. A batch key with rpm 6 (one dispatch every
// 10 s) sends 3 requests at once to a connection with cap 2: the first is
// served, the other two wait for their turns outside every gate (the
// connection's in-flight count is 0 while they wait), and another key's
// request is dispatched at once, before them. Before, the two waiting
// requests held both slots for 10–20 s with the upstream idle, and the
// other key's request timed out behind them.
func TestKeyPacingHoldsNoSlot(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-batch": {ID: "kb", Name: "batch", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(6)}},
		// Its own wait bound is short: behind held slots it would give up.
		"sk-live": {ID: "kl", Name: "interactive", Enabled: true, Limits: limits.ClientKeyLimits{MaxWaitMs: ptr(1500)}},
	}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(2, nil, 0)
	e.gw.Apply(Config{Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)

	batchCtx, cancelBatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(batchCtx, http.MethodPost, e.gwURL+"/v1/chat/completions", strings.NewReader(chatBody("glm-5", false)))
			req.Header.Set("Authorization", "Bearer sk-batch")
			req.Header.Set("Content-Type", "application/json")
			if resp, err := e.client.Do(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	t.Cleanup(func() { cancelBatch(); wg.Wait() })

	waitFor(t, 5*time.Second, "the batch key's first request served and the other two waiting for their turns", func() bool {
		e.gw.applyMu.Lock()
		batch := e.gw.keyCarries["kb"]
		e.gw.applyMu.Unlock()
		return e.up.Requests("k1", "glm-5") == 1 && e.up.InFlight() == 0 &&
			batch != nil && batch.Rate.TurnDelay(time.Now()) > 15*time.Second
	})
	// The first request's permit goes back as its answer ends; the two
	// waiting for their turns take none.
	waitFor(t, 5*time.Second, "the connection gate to hold nothing while the batch key waits for its own turns", func() bool {
		return e.gate("connection:c1").InFlight == 0
	})
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-live")...); r.status != http.StatusOK {
		t.Fatalf("the interactive key's request: %d %s, want 200 at once", r.status, r.body)
	}
	if got := e.up.Requests("k1", "glm-5"); got != 2 {
		t.Errorf("upstream got %d requests, want 2: the batch key's first and the interactive one, before the batch key's later turns", got)
	}
}
