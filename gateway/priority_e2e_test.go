package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// priorityKeys are the keys of the priority tests: I interactive, B batch,
// S with no class of its own (standard).
func priorityKeys() map[string]ClientKey {
	return map[string]ClientKey{
		"sk-i": {ID: "ki", Name: "i", Enabled: true, Limits: limits.ClientKeyLimits{Priority: ptr("interactive")}},
		"sk-b": {ID: "kb", Name: "b", Enabled: true, Limits: limits.ClientKeyLimits{Priority: ptr("batch")}},
		"sk-s": {ID: "ks", Name: "s", Enabled: true},
	}
}

// newPriorityEnv is a gateway with priorityKeys and one connection whose
// model glm-5 has cap modelCap, recording the upstream's request headers.
func newPriorityEnv(t *testing.T, modelCap int) *env {
	t.Helper()
	keys := priorityKeys()
	e := newEnv(t, upstreamtest.Options{RecordHeaders: true}, withKeys(keys))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": modelCap}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	return e
}

// TestPriorityEndToEnd: a key of class interactive and one of class batch,
// 24 concurrent clients each sending requests in a loop through real HTTP,
// saturate one cap-2 model gate whose upstream answers after a fixed
// latency: of the first 200 completed requests the interactive key has at
// least 90 % (batch gets in only while no interactive request waits, or by
// aging, 10 s by default). Counted, not timed.
func TestPriorityEndToEnd(t *testing.T) {
	t.Parallel()
	e := newPriorityEnv(t, 2)
	if err := e.up.SetDefault(upstreamtest.Behavior{Latency: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	const clients, total = 24, 200
	var done atomic.Int64
	var mu sync.Mutex
	completed := map[string]int{}
	var failed atomic.Value
	var wg sync.WaitGroup
	for _, secret := range []string{"sk-i", "sk-b"} {
		for range clients {
			wg.Go(func() {
				for done.Load() < total {
					r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as(secret)...)
					if r.status != http.StatusOK {
						failed.Store(fmt.Sprintf("%s: %d %s", secret, r.status, r.body))
						return
					}
					if done.Add(1) <= total {
						mu.Lock()
						completed[secret]++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("a request failed: %v", f)
	}
	i, b := completed["sk-i"], completed["sk-b"]
	t.Logf("end to end, interactive vs batch, 24 clients each, cap 2, 5 ms upstream, first 200 completions: interactive %d, batch %d; peak at the upstream %d",
		i, b, e.up.Peak("k1", "glm-5"))
	if i*10 < total*9 {
		t.Errorf("interactive %d of %d, want at least 90 %%", i, total)
	}
	if p := e.up.Peak("k1", "glm-5"); p > 2 {
		t.Errorf("peak at the upstream %d, over the cap 2", p)
	}
}

// queueWith sends a request of secret with extra headers and waits until
// the model gate has one more waiter; it names itself in its
// Idempotency-Key.
func queueWith(t *testing.T, e *env, done chan<- reply, name, secret string, hdr ...string) {
	t.Helper()
	queued := e.gate("model:c1:glm-5").Queued
	go func() {
		h := append(append(as(secret), "Idempotency-Key", name), hdr...)
		done <- e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false), h...)
	}()
	waitFor(t, 10*time.Second, name+" queued", func() bool { return e.gate("model:c1:glm-5").Queued == queued+1 })
}

// TestPriorityHeaderLowers: on a cap-1 gate, a request of the interactive
// key that says X-Gatehouse-Priority: batch queues behind the key's later
// requests and a standard key's (it asked for batch), and the gate counts
// it as batch; the key's other requests keep their arrival order.
func TestPriorityHeaderLowers(t *testing.T) {
	t.Parallel()
	e := newPriorityEnv(t, 1)
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 16)
	go func() {
		done <- e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false), append(as("sk-s"), "Idempotency-Key", "blocker")...)
	}()
	waitFor(t, 10*time.Second, "the blocker in flight", func() bool { return e.up.InFlight() == 1 })
	queueWith(t, e, done, "lowered", "sk-i", HeaderPriority, "batch")
	queueWith(t, e, done, "std", "sk-s")
	queueWith(t, e, done, "inter-1", "sk-i")
	queueWith(t, e, done, "same", "sk-i", HeaderPriority, "interactive") // its own class: allowed
	queueWith(t, e, done, "inter-2", "sk-i")
	g := e.gate("model:c1:glm-5")
	if want := map[string]int{"interactive": 3, "standard": 1, "batch": 1}; !mapsEqual(g.QueuedByPriority, want) {
		t.Errorf("queued by priority %v, want %v", g.QueuedByPriority, want)
	}
	var live []int
	for _, c := range e.gw.Snapshot().Clients {
		if c.ID == "ki" {
			live = []int{c.QueuedByPriority["interactive"], c.QueuedByPriority["batch"]}
			if c.Priority != "interactive" {
				t.Errorf("live client priority %q", c.Priority)
			}
		}
	}
	if !slices.Equal(live, []int{3, 1}) {
		t.Errorf("key i queued interactive, batch = %v, want 3, 1", live)
	}
	if err := e.up.SetDefault(upstreamtest.Behavior{}); err != nil {
		t.Fatal(err)
	}
	close(hold)
	for range 6 {
		if r := <-done; r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	order := upstreamOrder(e)[1:]
	if want := []string{"inter-1", "same", "inter-2", "std", "lowered"}; !slices.Equal(order, want) {
		t.Errorf("admission order %v, want %v", order, want)
	}
}

// TestPriorityHeaderRefused: a header naming a class above the key's or an
// unknown class is 400 INVALID_REQUEST naming the header;
// nothing reaches the upstream.
func TestPriorityHeaderRefused(t *testing.T) {
	t.Parallel()
	e := newPriorityEnv(t, 1)
	for _, tc := range []struct {
		secret string
		values []string
		says   string
	}{
		{"sk-b", []string{"interactive"}, "above the batch class"},
		{"sk-b", []string{"standard"}, "above the batch class"},
		{"sk-s", []string{"interactive"}, "above the standard class"},
		{"sk-i", []string{"urgent"}, "must be one of"},
		{"sk-i", []string{"Batch"}, "must be one of"},
	} {
		var hdr []string
		for _, v := range tc.values {
			hdr = append(hdr, HeaderPriority, v)
		}
		r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false), append(as(tc.secret), hdr...)...)
		if r.status != http.StatusBadRequest || r.errorCode(t) != CodeInvalidRequest || !strings.Contains(r.body, HeaderPriority) || !strings.Contains(r.body, tc.says) {
			t.Errorf("%s with %v: %d %s, want 400 %s saying %q", tc.secret, tc.values, r.status, r.body, CodeInvalidRequest, tc.says)
		}
	}
	if n := len(e.up.ReceivedHeaders()); n != 0 {
		t.Errorf("%d refused requests reached the upstream", n)
	}
	// Lowering is fine, and the key's own class too.
	for _, tc := range [][2]string{{"sk-b", "batch"}, {"sk-s", "batch"}, {"sk-i", "standard"}} {
		if r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false), append(as(tc[0]), HeaderPriority, tc[1])...); r.status != http.StatusOK {
			t.Errorf("%s lowering to %s: %d %s", tc[0], tc[1], r.status, r.body)
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
