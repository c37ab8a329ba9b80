package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// ownRedis starts a Redis for one test, which may kill and restart it.
func ownRedis(t *testing.T) *redisServer {
	t.Helper()
	s, err := startRedis(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.stop()
		}
	})
	return s
}

func (s *redisServer) restart(t *testing.T) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

func (s *redisServer) crash(t *testing.T) {
	t.Helper()
	if err := s.kill(); err != nil {
		t.Fatal(err)
	}
}

// takeAll takes slots with TryAcquire until one fails and returns them.
func takeAll(c *Controller, req admission.Request, limit int) []admission.Grant {
	var out []admission.Grant
	for range limit {
		p, ok := c.TryAcquire(req)
		if !ok {
			break
		}
		out = append(out, p)
	}
	return out
}

func releaseAll(ps []admission.Grant) {
	for _, p := range ps {
		p.Release()
	}
}

// TestFailClosed: with Redis gone, admission fails with an *UnavailableError
// (CLUSTER_UNAVAILABLE) — new requests and parked waiters alike, a parked
// one at its next re-check, told by the failed Redis call itself rather than
// by its wait bound or a lease running out — and shared caps resume when
// Redis is back.
func TestFailClosed(t *testing.T) {
	srv := ownRedis(t)
	const gate = "connection:c1"
	// Leases renewed every 20 s: no renewal fails before the waiter's own
	// re-check (every 100 ms) does, so the outage it is told of is the one
	// its re-check found.
	c := newController(t, newClient(t, srv.sock), Options{Prefix: uniquePrefix(t), FailMode: FailClosed,
		Recheck: 100 * time.Millisecond, LeaseTTL: time.Minute})
	c.SetCaps(map[string]int{gate: 1})
	req := admission.Request{Gates: path(gate), MaxWait: time.Minute}
	holder := mustTryAcquire(t, c, req)
	waiting := acquireAsync(t.Context(), c, req)
	waitFor(t, 5*time.Second, "waiter queued", func() bool { return zcard(t, c.rdb, c.keys.queue(gate)) == 1 })

	srv.crash(t)
	stopped := time.Now()
	// A hang guard, not a timing: a waiter left parked would sit out its
	// minute (or at best hear of the outage from the renewal 20 s on); one
	// told by its first failed re-check (every 100 ms) answers within an op.
	r := recv(t, waiting, 10*time.Second)
	t.Logf("parked waiter learned of the outage %s after Redis stopped", time.Since(stopped))
	var ue *UnavailableError
	if !errors.As(r.err, &ue) || !errors.Is(r.err, ErrUnavailable) {
		t.Fatalf("parked waiter got %v, want an *UnavailableError (ErrUnavailable)", r.err)
	}
	// The cause is the Redis call of its re-check that failed (the acquire
	// script), not a renewal or a timeout of the wait.
	if ue.Cause == nil || !unreachable(ue.Cause) || !strings.HasPrefix(ue.Cause.Error(), "cluster: acquire: ") {
		t.Errorf("parked waiter's error cause = %v, want the failed acquire of its re-check", ue.Cause)
	}
	if !c.Degraded() {
		t.Error("Degraded() = false after a waiter was told Redis is away")
	}
	_, err := c.Acquire(t.Context(), req)
	ue = nil
	if !errors.As(err, &ue) || ue.Cause == nil {
		t.Fatalf("Acquire with Redis down = %v, want *UnavailableError with a cause", err)
	}
	// The gateway recognises the rejection by admission's sentinel, without
	// importing this package.
	if !errors.Is(err, admission.ErrUnavailable) {
		t.Errorf("Acquire with Redis down = %v, want an error matching admission.ErrUnavailable", err)
	}
	if _, ok := c.TryAcquire(req); ok {
		t.Fatal("TryAcquire admitted with Redis down in fail-closed mode")
	}
	if got := c.Live(); got.Mode != live.ClusterFailClosed || !got.Degraded {
		t.Errorf("Live() with Redis down = %+v, want mode %s, degraded", got, live.ClusterFailClosed)
	}
	holder.Release() // lost with the server; must not panic or block

	srv.restart(t)
	waitFor(t, 5*time.Second, "recovery", func() bool { return !c.Degraded() })
	p, err := c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatalf("Acquire after recovery: %v", err)
	}
	if n := zcard(t, c.rdb, c.keys.holders(gate)); n != 1 {
		t.Errorf("holders in Redis after recovery = %d, want 1 (shared caps resumed)", n)
	}
	p.Release()
}

// TestFailOpen: with Redis gone each replica admits up to its share of the
// cap (cap ÷ live replicas); when Redis is back the cap is shared again.
func TestFailOpen(t *testing.T) {
	srv := ownRedis(t)
	const gate = "connection:c1"
	prefix := uniquePrefix(t)
	var reps []*Controller
	for i := range 2 {
		c := newController(t, newClient(t, srv.sock), Options{Prefix: prefix, ReplicaID: fmt.Sprintf("r%d", i),
			LeaseTTL: 600 * time.Millisecond, Recheck: 100 * time.Millisecond})
		c.SetCaps(map[string]int{gate: 5})
		reps = append(reps, c)
	}
	a, b := reps[0], reps[1]
	waitFor(t, 5*time.Second, "both replicas registered", func() bool { return a.Replicas() == 2 && b.Replicas() == 2 })
	req := admission.Request{Gates: path("global", gate), MaxWait: 50 * time.Millisecond}

	srv.crash(t)
	stopped := time.Now()
	got := takeAll(a, req, 10)
	// How soon fail-open applies is a matter of the op timeout and the
	// machine's load: logged, not asserted (no pass/fail on wall-clock time).
	t.Logf("fail-open applied %s after Redis stopped", time.Since(stopped))
	if !a.Degraded() {
		t.Error("Degraded() = false with Redis down")
	}
	if got, want := *a.Live(), (live.Cluster{Mode: live.ClusterFailOpen, ReplicaID: "r0", Replicas: 2, Degraded: true}); got != want {
		t.Errorf("Live() with Redis down = %+v, want %+v", got, want)
	}
	if len(got) != 2 {
		t.Errorf("replica A admitted %d with Redis down, want 2 (cap 5 ÷ 2 replicas)", len(got))
	}
	if _, err := a.Acquire(t.Context(), req); !errors.Is(err, admission.ErrTimeout) {
		t.Errorf("Acquire beyond the share = %v, want SEMAPHORE_TIMEOUT from the fallback", err)
	}
	releaseAll(got)

	srv.restart(t)
	waitFor(t, 5*time.Second, "recovery", func() bool { return !a.Degraded() && !b.Degraded() })
	if got := b.Live(); got.Mode != live.ClusterRedisOK || got.Degraded || got.ReplicaID != "r1" {
		t.Errorf("Live() after recovery = %+v, want mode %s for r1, not degraded", got, live.ClusterRedisOK)
	}
	heldA := takeAll(a, req, 3)
	heldB := takeAll(b, req, 10)
	if len(heldA) != 3 || len(heldB) != 2 {
		t.Errorf("after recovery A took %d (want 3) and B took %d (want 2): the cap of 5 is shared again", len(heldA), len(heldB))
	}
	releaseAll(heldA)
	releaseAll(heldB)
}

func TestParseFailMode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    FailMode
		wantErr bool
	}{
		{name: "default", in: "", want: FailOpen},
		{name: "open", in: "fail-open", want: FailOpen},
		{name: "closed", in: "fail-closed", want: FailClosed},
		{name: "unknown", in: "closed", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFailMode(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("ParseFailMode(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err == nil && tt.in != "" && got.String() != tt.in {
				t.Errorf("String() = %q, want %q", got.String(), tt.in)
			}
		})
	}
}
