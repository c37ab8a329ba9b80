package gateway

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestFailoverQueuedWaiterSkipsUnhealthy checks that a request queued on a
// connection that meanwhile answered 429 (cooling) or 401/403 (suspended) is
// not dispatched to it when its slot frees: it fails over, or gets the
// gateway's own answer, without the upstream seeing it.
func TestFailoverQueuedWaiterSkipsUnhealthy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fail       upstreamtest.Failure
		withBackup bool
		wantStatus int
		wantCode   string
	}{
		{name: "429 alone", fail: "429", wantStatus: http.StatusTooManyRequests, wantCode: CodeUpstreamCooldown},
		{name: "403 alone", fail: "403", wantStatus: http.StatusServiceUnavailable, wantCode: CodeNoHealthy},
		{name: "429 fails over", fail: "429", withBackup: true, wantStatus: http.StatusOK},
		{name: "401 fails over", fail: "401", withBackup: true, wantStatus: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, upstreamtest.Options{})
			a := e.conn("a", "ka", "glm-5")
			a.Priority = 10
			a.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
			conns := []Connection{a}
			if tc.withBackup {
				// b is saturated by a held request, so the waiter queues on a.
				b := e.conn("b", "kb", "glm-5")
				b.Overrides = caps(1, nil, 60000)
				conns = append(conns, b)
			}
			e.gw.Apply(Config{Connections: conns})
			ctx := testCtx(t)
			holdA, holdB := make(chan struct{}), make(chan struct{})
			e.mustBehave("ka", upstreamtest.Behavior{Fail: tc.fail, RetryAfter: 30 * time.Second, Hold: holdA})
			e.mustBehave("kb", upstreamtest.Behavior{Hold: holdB})
			var wg sync.WaitGroup
			replies := make(chan reply, 3)
			post := func() {
				wg.Go(func() { replies <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) })
			}
			post() // takes a's slot, answered with tc.fail once released
			if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByKey["ka"].InFlight == 1 }); err != nil {
				t.Fatal(err)
			}
			if tc.withBackup {
				post() // takes b's slot
				if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByKey["kb"].InFlight == 1 }); err != nil {
					t.Fatal(err)
				}
			}
			qctx, cancelQ := context.WithCancel(ctx)
			defer cancelQ()
			queued := make(chan reply, 1)
			go func() { queued <- e.post(qctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
			waitFor(t, 2*time.Second, "a waiter queued on a", func() bool { return e.gate("model:a:glm-5").Queued == 1 })
			close(holdA)
			if tc.withBackup {
				// The waiter must not go to a; let b finish so it can go there.
				waitFor(t, 2*time.Second, "a's first request answered", func() bool { return e.up.Requests("ka", "glm-5") == 1 && e.gate("model:a:glm-5").InFlight == 0 })
				close(holdB)
			}
			r := <-queued
			if !tc.withBackup {
				close(holdB)
			}
			wg.Wait()
			if r.status != tc.wantStatus {
				t.Fatalf("queued request: status %d %s, want %d", r.status, r.body, tc.wantStatus)
			}
			if tc.wantCode != "" {
				checkShape(t, r, "openai", tc.wantCode)
			} else {
				expectVia(t, r, "conn-b")
			}
			if got := e.up.Requests("ka", "glm-5"); got != 1 {
				t.Errorf("a got %d requests, want 1: the queued one went to an unhealthy connection", got)
			}
		})
	}
}

// offsetClock is the real clock plus an offset a test can move forward: the
// gateway's waits still run on real timers, but the time they count (a
// permit's Waited, cooldowns) includes the jumps.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *offsetClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// A queued request whose connection turned unhealthy while it waited starts its choice
// over, but not its clock: maxWaitMs bounds its whole wait.
//
// The first wait is made to count 59 of the 60 s (the gateway's clock jumps
// while the request is queued on a), so on b only about a second is left.
// Restarting the wait would give it a fresh minute there: it would still be
// queued on b long after the guard below. The guard is a hang guard (20×
// the expected wait, a third of the wrong one), not a timing.
func TestRechooseKeepsTheWaitBound(t *testing.T) {
	t.Parallel()
	const (
		maxWait = time.Minute
		jump    = 59 * time.Second
	)
	clock := &offsetClock{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Now = clock.Now })
	a := e.conn("a", "ka", "glm-5")
	a.Priority = 10
	a.Overrides = caps(0, map[string]int{"glm-5": 1}, int(maxWait.Milliseconds()))
	b := e.conn("b", "kb", "glm-5")
	b.Overrides = caps(1, nil, int(maxWait.Milliseconds()))
	e.gw.Apply(Config{Connections: []Connection{a, b}})
	ctx := testCtx(t)
	holdA, holdB := make(chan struct{}), make(chan struct{})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "429", RetryAfter: 30 * time.Second, Hold: holdA})
	e.mustBehave("kb", upstreamtest.Behavior{Hold: holdB})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(holdB)
	for _, key := range []string{"ka", "kb"} { // one request holds each connection's slot
		wg.Go(func() { e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) })
		if err := e.up.WaitUntil(ctx, func(st upstreamtest.Stats) bool { return st.ByKey[key].InFlight == 1 }); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	queued := make(chan reply, 1)
	go func() { queued <- e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)) }()
	waitFor(t, 2*time.Second, "a waiter queued on a", func() bool { return e.gate("model:a:glm-5").Queued == 1 })
	// The scenario: after 59 s of waiting, a answers its request with a 429, so the
	// waiter is admitted on a connection now cooling down and must start over on b,
	// which stays busy: it may wait there only what is left of its minute.
	clock.Advance(jump)
	close(holdA)
	var r reply
	select {
	case r = <-queued:
	case <-time.After(20 * time.Second):
		t.Fatalf("the queued request is still waiting 20 s after a's 429, with %s of its %s left: starting over restarted the wait", maxWait-jump, maxWait)
	}
	t.Logf("the queued request answered %s after it was sent (%s of its wait left after a)", time.Since(start), maxWait-jump)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("queued request: status %d %s, want 429", r.status, r.body)
	}
	checkShape(t, r, "openai", admission.CodeTimeout)
	if got := r.header.Get(HeaderGate); got != "connection:b" {
		t.Errorf("%s = %q, want connection:b (it timed out on b, after starting over)", HeaderGate, got)
	}
	// The whole bound was waited, counted once: a's 59 s and the rest on b.
	if ms, err := strconv.Atoi(r.header.Get(HeaderQueueMs)); err != nil || ms < int(maxWait.Milliseconds()) || ms >= int((maxWait+jump).Milliseconds()) {
		t.Errorf("%s = %q, want from %d up to %d (the bound, a's wait and b's rest)", HeaderQueueMs, r.header.Get(HeaderQueueMs),
			maxWait.Milliseconds(), (maxWait + jump).Milliseconds())
	}
	if got := e.up.Requests("ka", "glm-5"); got != 1 {
		t.Errorf("a got %d requests, want 1", got)
	}
	if g := e.gate("connection:b"); g.Timeouts != 1 || g.Admitted != 1 {
		t.Errorf("connection:b timeouts %d admitted %d, want 1 and 1 (the holder)", g.Timeouts, g.Admitted)
	}
}
