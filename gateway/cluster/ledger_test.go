package cluster

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// partition is a go-redis hook that cuts one client off a Redis that stays
// up for everybody else, as a network partition would: while on, every
// command fails with a network error before it is sent.
type partition struct{ on atomic.Bool }

var errPartitioned = &net.OpError{Op: "dial", Net: "unix", Err: errors.New("test: partitioned from Redis")}

func (p *partition) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *partition) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if p.on.Load() {
			cmd.SetErr(errPartitioned)
			return errPartitioned
		}
		return next(ctx, cmd)
	}
}

func (p *partition) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if p.on.Load() {
			for _, cmd := range cmds {
				cmd.SetErr(errPartitioned)
			}
			return errPartitioned
		}
		return next(ctx, cmds)
	}
}

// registration is the expiry of c's entry in the live replicas (0 if none).
func registration(t testing.TB, rdb redis.UniversalClient, c *Controller) float64 {
	t.Helper()
	s, err := rdb.ZScore(t.Context(), c.keys.replicas, c.replica).Result()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatalf("ZSCORE replicas: %v", err)
	}
	return s
}

// heartbeats waits until c has renewed its registration n more times.
func heartbeats(t testing.TB, rdb redis.UniversalClient, c *Controller, n int) {
	t.Helper()
	last := registration(t, rdb, c)
	for range n {
		waitFor(t, 10*time.Second, "a heartbeat", func() bool {
			s := registration(t, rdb, c)
			if s != last {
				last = s
				return true
			}
			return false
		})
	}
}

// redisNow is Redis's clock in ms, the clock every score is on.
func redisNow(t testing.TB, rdb redis.UniversalClient) float64 {
	t.Helper()
	now, err := rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return float64(now.UnixMilli())
}

// TestLostLeaseCountedOnce: a lease that expired while its permit still runs
// is one lost slot, counted once however many heartbeats follow, and not
// again when the permit is released; the path's other lease is unaffected.
func TestLostLeaseCountedOnce(t *testing.T) {
	const gate = "connection:c1"
	// global is capped too: an uncapped gate takes no lease (see admit).
	c := replicas(t, 1, map[string]int{gate: 2, "global": 100}, Options{LeaseTTL: 300 * time.Millisecond})[0]
	req := admission.Request{Gates: path("global", gate)}
	p := mustTryAcquire(t, c, req)
	// The lease on gate expires, as a pause longer than the TTL would make it.
	member := p.(*lease).member
	if err := c.rdb.ZAdd(t.Context(), c.keys.holders(gate), redis.Z{Score: 1, Member: member}).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the lost lease noticed", func() bool { return c.LostLeases() > 0 })
	heartbeats(t, c.rdb, c, 4)
	if got := c.LostLeases(); got != 1 {
		t.Errorf("LostLeases after 4 more heartbeats = %d, want 1 (one slot lost)", got)
	}
	if n := zcard(t, c.rdb, c.keys.holders("global")); n != 1 {
		t.Errorf("holders of global = %d, want 1: the path's other lease is still renewed", n)
	}
	p.Release()
	if got := c.LostLeases(); got != 1 {
		t.Errorf("LostLeases after the release = %d, want 1", got)
	}
	if n := zcard(t, c.rdb, c.keys.holders("global")); n != 0 {
		t.Errorf("holders of global after the release = %d, want 0", n)
	}
}

// TestPartitionedReplicaLeavesQueue: a replica cut off from Redis drops its
// waiters locally (fail-closed here); when it reaches Redis again it removes
// their queue entries before anything else, so the free slot goes to the next
// request at once instead of after the entries' expiry (15 s TTL here).
func TestPartitionedReplicaLeavesQueue(t *testing.T) {
	const gate = "connection:c1"
	prefix := uniquePrefix(t)
	cut := &partition{}
	rdbA := newClient(t, shared.sock)
	rdbA.AddHook(cut)
	opts := Options{Prefix: prefix, FailMode: FailClosed, Recheck: 100 * time.Millisecond}
	optsA := opts
	optsA.ReplicaID = "a"
	a := newController(t, rdbA, optsA)
	optsB := opts
	optsB.ReplicaID = "b"
	b := newController(t, newClient(t, shared.sock), optsB)
	caps := map[string]int{gate: 1}
	a.SetCaps(caps)
	b.SetCaps(caps)
	rdb := b.rdb
	req := admission.Request{Gates: path(gate), MaxWait: 30 * time.Second}

	holder := mustTryAcquire(t, b, req)
	waiting := acquireAsync(t.Context(), a, req)
	waitFor(t, 5*time.Second, "A's waiter queued", func() bool { return zcard(t, rdb, a.keys.queue(gate)) == 1 })

	cut.on.Store(true)
	if _, ok := a.TryAcquire(req); ok {
		t.Fatal("TryAcquire admitted on a partitioned fail-closed replica")
	}
	if r := recv(t, waiting, 5*time.Second); !errors.Is(r.err, ErrUnavailable) {
		t.Fatalf("A's waiter got %v, want ErrUnavailable", r.err)
	}
	cut.on.Store(false)
	waitFor(t, 5*time.Second, "A back on Redis", func() bool { return !a.Degraded() })
	for _, k := range []string{a.keys.queue(gate), a.keys.expiry(gate), a.keys.waiting(gate)} {
		if n := zcard(t, rdb, k); n != 0 {
			t.Errorf("%s holds %d once A is back, want 0 (its waiter is gone)", k, n)
		}
	}
	holder.Release()
	p, ok := b.TryAcquire(req)
	if !ok {
		t.Fatal("the free slot is held back by a waiter that no longer exists")
	}
	p.Release()
}

// TestLostClientQueueEntriesLapse: a replica that loses its Redis client for
// good cannot remove its queue entries; they stop counting within two renew
// periods of its last heartbeat, a renew period before its registration
// (a whole TTL) runs out, so the slot they held back is used by then.
func TestLostClientQueueEntriesLapse(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{LeaseTTL: 1500 * time.Millisecond, Recheck: 50 * time.Millisecond})
	a, b := reps[0], reps[1]
	rdb := b.rdb
	req := admission.Request{Gates: path(gate), MaxWait: 10 * time.Second}
	holder := mustTryAcquire(t, b, req)
	ghost := acquireAsync(t.Context(), a, req)
	waitFor(t, 5*time.Second, "A's waiter queued", func() bool { return zcard(t, rdb, a.keys.queue(gate)) == 1 })
	// One heartbeat after the queueing, so the entry and the registration
	// were last renewed together; then A's client is gone.
	heartbeats(t, rdb, a, 1)
	if err := a.rdb.Close(); err != nil {
		t.Fatal(err)
	}
	holder.Release()
	r := recv(t, acquireAsync(t.Context(), b, req), 10*time.Second)
	if r.err != nil {
		t.Fatalf("B's Acquire: %v", r.err)
	}
	if reg, now := registration(t, rdb, a), redisNow(t, rdb); reg <= now {
		t.Errorf("B was admitted only once A's registration had expired (registration %.0f, now %.0f): A's dead waiter counted for a whole TTL", reg, now)
	}
	r.p.Release()
	if g := recv(t, ghost, 10*time.Second); g.err == nil {
		g.p.Release() // admitted by A's fallback: local only
	}
}

// TestFailOpenPermitsEnterLedger: permits a replica admitted fail-open and
// still running when Redis returns are entered in the ledger before it admits
// anything new through Redis, so from then on the cluster-wide in-flight
// never exceeds the cap.
func TestFailOpenPermitsEnterLedger(t *testing.T) {
	srv := ownRedis(t)
	const gate = "connection:c1"
	prefix := uniquePrefix(t)
	caps := map[string]int{gate: 2}
	opts := Options{Prefix: prefix, LeaseTTL: 1500 * time.Millisecond, Recheck: 50 * time.Millisecond}
	optsA := opts
	optsA.ReplicaID = "a"
	a := newController(t, newClient(t, srv.sock), optsA)
	a.SetCaps(caps)
	req := admission.Request{Gates: path("global", gate), MaxWait: 10 * time.Second}

	var inFlight, peak atomic.Int64
	took := func(p admission.Grant) admission.Grant {
		n := inFlight.Add(1)
		for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
		}
		return p
	}
	release := func(p admission.Grant) {
		inFlight.Add(-1)
		p.Release()
	}

	srv.crash(t)
	var heldA []admission.Grant
	for _, p := range takeAll(a, req, 10) {
		heldA = append(heldA, took(p))
	}
	if !a.Degraded() || len(heldA) != 2 {
		t.Fatalf("A with Redis down: degraded %v, admitted %d; want true, 2 (its share of cap 2, alone)", a.Degraded(), len(heldA))
	}
	srv.restart(t)
	optsB := opts
	optsB.ReplicaID = "b"
	b := newController(t, newClient(t, srv.sock), optsB)
	b.SetCaps(caps)
	waitFor(t, 5*time.Second, "A back on Redis", func() bool { return !a.Degraded() })
	peak.Store(inFlight.Load()) // the cap holds from here on

	if n := zcard(t, b.rdb, b.keys.holders(gate)); n != 2 {
		t.Errorf("holders of %s in Redis once A is back = %d, want 2 (A's fail-open permits)", gate, n)
	}
	var heldB []admission.Grant
	for _, c := range []*Controller{b, b, a} {
		if p, ok := c.TryAcquire(req); ok {
			heldB = append(heldB, took(p))
		}
	}
	if len(heldB) != 0 {
		t.Errorf("%d admitted through Redis while A's 2 fail-open permits run, want 0 (cap 2)", len(heldB))
	}
	waiting := acquireAsync(t.Context(), b, req)
	waitFor(t, 5*time.Second, "B's waiter queued", func() bool { return zcard(t, b.rdb, b.keys.queue(gate)) == 1 })
	release(heldA[0])
	r := recv(t, waiting, 10*time.Second)
	if r.err != nil {
		t.Fatalf("B's waiter after A released one: %v", r.err)
	}
	heldB = append(heldB, took(r.p))
	if p, ok := b.TryAcquire(req); ok {
		t.Error("B admitted a third request with A's remaining permit running (cap 2)")
		p.Release()
	}
	if got := peak.Load(); got > 2 {
		t.Errorf("peak in-flight across both replicas after Redis returned = %d, want at most 2", got)
	}
	release(heldA[1])
	for _, p := range heldB {
		release(p)
	}
	for _, k := range []string{b.keys.holders(gate), b.keys.holders("global")} {
		if n := zcard(t, b.rdb, k); n != 0 {
			t.Errorf("%s holds %d after every release, want 0", k, n)
		}
	}
}
