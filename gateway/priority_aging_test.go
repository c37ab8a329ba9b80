package gateway

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestPriorityAgingFromSettings: the settings' priorityAgingMs reaches the
// admission controller. On a held cap-1 gate, on the gateway's fake clock, a
// batch request waits 2 s and then an interactive one queues: with
// priorityAgingMs 1000 the batch request has aged to interactive and, the
// earlier of the two, goes first; with the default (10 000) the
// interactive one does. Counted on the fake clock, through real HTTP.
func TestPriorityAgingFromSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		agingMs *int
		want    []string
	}{
		{ptr(1000), []string{"blocker", "old-batch", "interactive"}},
		{nil, []string{"blocker", "interactive", "old-batch"}},
	} {
		keys := priorityKeys()
		clock := newFakeClock()
		e := newEnv(t, upstreamtest.Options{RecordHeaders: true}, withKeys(keys), withClock(clock))
		c := e.conn("c1", "k1", "glm-5")
		c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
		e.gw.Apply(Config{Settings: limits.Settings{PriorityAgingMs: tc.agingMs}, Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
		hold := make(chan struct{})
		if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
			t.Fatal(err)
		}
		done := make(chan reply, 3)
		go func() {
			done <- e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false), append(as("sk-s"), "Idempotency-Key", "blocker")...)
		}()
		waitFor(t, 10*time.Second, "the blocker in flight", func() bool { return e.up.InFlight() == 1 })
		queueWith(t, e, done, "old-batch", "sk-b")
		clock.Advance(2 * time.Second)
		queueWith(t, e, done, "interactive", "sk-i")
		if err := e.up.SetDefault(upstreamtest.Behavior{}); err != nil {
			t.Fatal(err)
		}
		close(hold)
		for range 3 {
			if r := <-done; r.status != http.StatusOK {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
		}
		if got := upstreamOrder(e); !slices.Equal(got, tc.want) {
			aging := "default"
			if tc.agingMs != nil {
				aging = time.Duration(*tc.agingMs * int(time.Millisecond)).String()
			}
			t.Errorf("priorityAgingMs %s: admission order %v, want %v", aging, got, tc.want)
		}
	}
}
