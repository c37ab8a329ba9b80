package gateway

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// fairKeys are the keys of the fair-share tests: A of weight 1, B of weight
// 3, C of weight 1 (the newcomer).
func fairKeys() map[string]ClientKey {
	return map[string]ClientKey{
		"sk-a": {ID: "ka", Name: "a", Enabled: true, Limits: limits.ClientKeyLimits{Weight: ptr(1)}},
		"sk-b": {ID: "kb", Name: "b", Enabled: true, Limits: limits.ClientKeyLimits{Weight: ptr(3)}},
		"sk-c": {ID: "kc", Name: "c", Enabled: true},
	}
}

// newFairEnv is a gateway with fairKeys and one connection whose model glm-5
// has cap modelCap, recording the upstream's request headers (the request's
// Idempotency-Key names it there).
func newFairEnv(t *testing.T, modelCap int) *env {
	t.Helper()
	keys := fairKeys()
	e := newEnv(t, upstreamtest.Options{RecordHeaders: true}, withKeys(keys))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": modelCap}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	return e
}

// TestClientKeyFairShareEndToEnd: keys A (weight 1) and B (weight 3), 24
// concurrent clients each sending requests in a loop through real HTTP,
// saturate one cap-4 model gate whose upstream answers after a fixed
// latency; of the first 600 completed requests B has 3 times as many as A
// (2.5–3.5). Counted, not timed: the run stops after a number of
// completions, not after a duration.
func TestClientKeyFairShareEndToEnd(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, 4)
	if err := e.up.SetDefault(upstreamtest.Behavior{Latency: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	const clients, total = 24, 600
	var done atomic.Int64
	var mu sync.Mutex
	completed := map[string]int{}
	var failed atomic.Value
	var wg sync.WaitGroup
	for _, secret := range []string{"sk-a", "sk-b"} {
		for range clients {
			wg.Go(func() {
				for done.Load() < total {
					r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as(secret)...)
					if r.status != http.StatusOK {
						failed.Store(fmt.Sprintf("%s: %d %s", secret, r.status, r.body))
						return
					}
					// Count the first total completions only: when they are
					// done every client still has one request out, and those
					// last 48 finish whatever the shares.
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
	a, b := completed["sk-a"], completed["sk-b"]
	ratio := float64(b) / float64(a)
	t.Logf("end to end, weights 1:3, 24 clients each, cap 4, 5 ms upstream, first 600 completions: A %d, B %d (B/A %.2f); peak at the upstream %d",
		a, b, ratio, e.up.Peak("k1", "glm-5"))
	if ratio < 2.5 || ratio > 3.5 {
		t.Errorf("B/A = %.2f (A %d, B %d), want 2.5–3.5", ratio, a, b)
	}
	if p := e.up.Peak("k1", "glm-5"); p > 4 {
		t.Errorf("peak at the upstream %d, over the cap 4", p)
	}
}

// fairQueue sends requests of the given keys one at a time, each once the
// one before it is queued at the model gate, so that their arrival order is
// known, their replies landing on done; it returns their names. Each request names
// itself in its Idempotency-Key: "<secret>-<i>".
func fairQueue(t *testing.T, e *env, done chan<- reply, secrets ...string) []string {
	t.Helper()
	ctx := testCtx(t)
	var names []string
	queued := e.gate("model:c1:glm-5").Queued
	for i, secret := range secrets {
		name := fmt.Sprintf("%s-%d", secret, i)
		names = append(names, name)
		go func() {
			done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), append(as(secret), "Idempotency-Key", name)...)
		}()
		queued++
		waitFor(t, 10*time.Second, name+" queued", func() bool { return e.gate("model:c1:glm-5").Queued == queued })
	}
	return names
}

// upstreamOrder is the requests the upstream received, by Idempotency-Key,
// in arrival order. With a cap of 1 and no hold, one request is at the
// upstream at a time, so that order is the admission order.
func upstreamOrder(e *env) []string {
	var out []string
	for _, h := range e.up.ReceivedHeaders() {
		out = append(out, h.Get("Idempotency-Key"))
	}
	return out
}

// TestClientKeyFIFOWithinKeyEndToEnd: on a cap-1 model gate, A's requests
// (arriving interleaved with B's) are admitted in their arrival order while
// B takes its larger share; and so are B's.
func TestClientKeyFIFOWithinKeyEndToEnd(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, 1)
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 64)
	ctx := testCtx(t)
	go func() {
		done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), append(as("sk-b"), "Idempotency-Key", "blocker")...)
	}()
	waitFor(t, 10*time.Second, "the blocker in flight", func() bool { return e.up.InFlight() == 1 })
	var secrets []string
	for i := range 40 {
		secrets = append(secrets, []string{"sk-a", "sk-b", "sk-b", "sk-a", "sk-b"}[i%5])
	}
	names := fairQueue(t, e, done, secrets...)
	g := e.gate("model:c1:glm-5")
	if g.QueuedByClient["ka"] != 16 || g.QueuedByClient["kb"] != 24 {
		t.Errorf("queued by client %v, want ka 16, kb 24", g.QueuedByClient)
	}
	if err := e.up.SetDefault(upstreamtest.Behavior{}); err != nil {
		t.Fatal(err)
	}
	close(hold)
	for range len(names) + 1 {
		if r := <-done; r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	order := upstreamOrder(e)[1:] // after the blocker
	arrival := map[string]int{}
	for i, n := range names {
		arrival[n] = i
	}
	last := map[byte]int{'a': -1, 'b': -1}
	for _, n := range order {
		key := n[3] // "sk-a-…"
		if arrival[n] < last[key] {
			t.Errorf("key %c: %s admitted after a later arrival (order %v)", key, n, order)
		}
		last[key] = arrival[n]
	}
	t.Logf("admission order at the cap-1 gate: %v", order)
	// While both wait, B (weight 3) has three turns for each of A's.
	a := 0
	for _, n := range order[:20] {
		if n[3] == 'a' {
			a++
		}
	}
	if a < 4 || a > 6 {
		t.Errorf("A has %d of the first 20 admissions, want 5 ± 1 (a quarter)", a)
	}
}

// TestClientKeyNewcomerEndToEnd: while key A has 100 requests waiting at a
// cap-1 model gate, one request of key C (weight 1, no waiters) is admitted
// within the next ⌈1 ÷ 1⌉ + 1 = 2 admissions of that gate: counted at the
// upstream, which sees one request at a time.
func TestClientKeyNewcomerEndToEnd(t *testing.T) {
	t.Parallel()
	e := newFairEnv(t, 1)
	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 128)
	ctx := testCtx(t)
	go func() {
		done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), append(as("sk-a"), "Idempotency-Key", "blocker")...)
	}()
	waitFor(t, 10*time.Second, "the blocker in flight", func() bool { return e.up.InFlight() == 1 })
	for i := range 100 {
		go func() {
			done <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), append(as("sk-a"), "Idempotency-Key", fmt.Sprintf("a-%d", i))...)
		}()
	}
	waitFor(t, 10*time.Second, "100 of A queued", func() bool { return e.gate("model:c1:glm-5").QueuedByClient["ka"] == 100 })
	fairQueue(t, e, done, "sk-c")
	if err := e.up.SetDefault(upstreamtest.Behavior{}); err != nil {
		t.Fatal(err)
	}
	close(hold)
	for range 102 {
		if r := <-done; r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	order := upstreamOrder(e)
	at := -1
	for i, n := range order {
		if n == "sk-c-0" {
			at = i // admissions after C's arrival: order[1:] (order[0] is the blocker)
		}
	}
	t.Logf("newcomer C admitted at the %d-th admission after its arrival, behind 100 of A (bound 2)", at)
	if at < 1 || at > 2 {
		t.Errorf("C was the %d-th admission after its arrival, want within 2 (order %v)", at, order[:min(len(order), 5)])
	}
}
