package gateway

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestSnapshotGateIdentity: every gate of Snapshot names its level, connection,
// provider and model as fields, so that handlers and web never read a key —
// including a model id holding a colon and a model gate left over from an
// earlier config while it still holds a request.
func TestSnapshotGateIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 300 * time.Millisecond})
	c := e.conn("c1", "key-c1", "glm-5", "llama3:8b")
	c.Overrides = caps(4, map[string]int{"glm-5": 2, "llama3:8b": 1}, 60000)
	d := e.conn("c2", "key-c2", "gpt-x")
	d.Provider = "openai"
	e.gw.Apply(Config{
		Settings:    limits.Settings{GlobalMaxConcurrent: ptr(10), Providers: map[string]limits.ProviderSettings{"zai": {MaxConcurrent: ptr(6)}}},
		Connections: []Connection{c, d},
	})
	want := []live.Gate{
		{Key: "connection:c1", Level: live.LevelConnection, ConnectionID: "c1", Provider: "zai", Cap: 4, EffectiveCap: 4},
		{Key: "connection:c2", Level: live.LevelConnection, ConnectionID: "c2", Provider: "openai"},
		{Key: "global", Level: live.LevelGlobal, Cap: 10, EffectiveCap: 10},
		{Key: "model:c1:glm-5", Level: live.LevelModel, ConnectionID: "c1", Provider: "zai", Model: "glm-5", Cap: 2, EffectiveCap: 2},
		{Key: "model:c1:llama3:8b", Level: live.LevelModel, ConnectionID: "c1", Provider: "zai", Model: "llama3:8b", Cap: 1, EffectiveCap: 1},
		{Key: "provider:zai", Level: live.LevelProvider, Provider: "zai", Cap: 6, EffectiveCap: 6},
	}
	if diff := cmp.Diff(want, e.gw.Snapshot().Gates); diff != "" {
		t.Errorf("gates mismatch (-want +got):\n%s", diff)
	}

	// c1 leaves the config while a request holds its model gate: the gate is
	// still listed with its connection and model, without a provider.
	ctx := testCtx(t)
	done := make(chan int, 1)
	go func() { done <- e.post(ctx, "/v1/chat/completions", chatBody("llama3:8b", false)).status }()
	waitFor(t, 5*time.Second, "llama3:8b in flight", func() bool { return e.gate("model:c1:llama3:8b").InFlight == 1 })
	e.gw.Apply(Config{Connections: []Connection{d}})
	got := e.gate("model:c1:llama3:8b")
	wantLeft := live.Gate{Key: "model:c1:llama3:8b", Level: live.LevelModel, ConnectionID: "c1", Model: "llama3:8b", InFlight: 1}
	if diff := cmp.Diff(wantLeft, got, cmpopts.IgnoreFields(live.Gate{}, "Admitted", "Waits")); diff != "" {
		t.Errorf("left-over gate mismatch (-want +got):\n%s", diff)
	}
	if status := <-done; status != 200 {
		t.Errorf("request through the removed connection: status %d, want 200", status)
	}
}
