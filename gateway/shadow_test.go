package gateway

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// shadowGate returns the live view of shadow gate key.
func (e *env) shadowGate(key string) (live.Gate, bool) {
	for _, g := range e.gw.Snapshot().Gates {
		if g.Key == key {
			return g, g.Shadow
		}
	}
	return live.Gate{}, false
}

// TestShadowCapCountsNeverEnforces: a shadow maxConcurrent of 2 (and a shadow
// model cap of 1) on a connection that runs 6 requests at once delays and
// rejects nothing; wouldQueue counts the requests that found the shadow cap
// reached, and peakInFlight is 6. Changing the shadow cap starts the counts
// afresh; keeping it keeps them.
func TestShadowCapCountsNeverEnforces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	a := e.conn("a", "ka", "glm-5")
	a.Overrides = caps(8, nil, 0)
	a.Overrides.Shadow = &limits.ShadowCaps{MaxConcurrent: ptr(2), ModelConcurrency: map[string]int{"glm-5": 1}}
	e.gw.Apply(Config{Connections: []Connection{a}})
	ctx := testCtx(t)

	hold := make(chan struct{})
	e.mustBehave("ka", upstreamtest.Behavior{Hold: hold})
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() { expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a") })
	}
	if err := e.up.WaitInFlight(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if g := e.gate("connection:a"); g.Queued != 0 || g.InFlight != 6 {
		t.Errorf("connection gate: %d in flight, %d queued; want 6, 0", g.InFlight, g.Queued)
	}
	for key, want := range map[string]live.Gate{
		"shadow:connection:a":  {Cap: 2, EffectiveCap: 2, InFlight: 6, WouldQueue: 4, PeakInFlight: 6, Level: live.LevelConnection, ConnectionID: "a"},
		"shadow:model:a:glm-5": {Cap: 1, EffectiveCap: 1, InFlight: 6, WouldQueue: 5, PeakInFlight: 6, Level: live.LevelModel, ConnectionID: "a", Model: "glm-5"},
	} {
		got, ok := e.shadowGate(key)
		if !ok {
			t.Fatalf("no shadow gate %s", key)
		}
		want.Key, want.Shadow, want.Provider, want.ShadowSince = key, true, "zai", got.ShadowSince
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s mismatch (-want +got):\n%s", key, diff)
		}
	}
	close(hold)
	wg.Wait()
	waitFor(t, 10*time.Second, "shadow gates idle", func() bool {
		v, _ := e.shadowGate("shadow:connection:a")
		return v.InFlight == 0
	})
	if g := e.gate("connection:a"); g.Timeouts != 0 || g.QueueFull != 0 {
		t.Errorf("connection gate rejected: %+v", g)
	}

	// Same shadow cap: the counts stay. A new one: they start afresh.
	e.gw.Apply(Config{Connections: []Connection{a}})
	if v, _ := e.shadowGate("shadow:connection:a"); v.WouldQueue != 4 || v.PeakInFlight != 6 {
		t.Errorf("after a reload with the same shadow cap: %+v, want the counts kept", v)
	}
	a.Overrides.Shadow = &limits.ShadowCaps{MaxConcurrent: ptr(3)}
	e.gw.Apply(Config{Connections: []Connection{a}})
	if v, _ := e.shadowGate("shadow:connection:a"); v.Cap != 3 || v.WouldQueue != 0 || v.PeakInFlight != 0 {
		t.Errorf("after the shadow cap changed to 3: %+v, want cap 3 and fresh counts", v)
	}
	if _, ok := e.shadowGate("shadow:model:a:glm-5"); ok {
		t.Error("the removed shadow model cap still has a gate")
	}
}
