package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestCapHoldsAcrossReplicas: 60 requests spread over three replicas for a
// gate with cap 2, each holding ~50 ms. An independent counter never sees
// more than 2 at once, and all are admitted within the wait bound.
func TestCapHoldsAcrossReplicas(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 3, map[string]int{gate: 2, "provider:p": 100}, Options{})
	req := admission.Request{Gates: path("global", "provider:p", gate), MaxWait: 20 * time.Second}

	var inFlight, peak atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 60)
	for i := range 60 {
		wg.Go(func() {
			p, err := reps[i%3].Acquire(t.Context(), req)
			if err != nil {
				errs <- fmt.Errorf("request %d: %w", i, err)
				return
			}
			n := inFlight.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			time.Sleep(50 * time.Millisecond) // the upstream call being admitted
			inFlight.Add(-1)
			p.Release()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := peak.Load(); got != 2 {
		t.Errorf("peak concurrency = %d, want 2 (cap 2, 60 requests)", got)
	}
	keys := reps[0].keys
	for _, k := range []string{keys.holders(gate), keys.queue(gate), keys.expiry(gate), keys.waiting(gate)} {
		if n := zcard(t, reps[0].rdb, k); n != 0 {
			t.Errorf("%s has %d members after every release, want 0", k, n)
		}
	}
	if n, err := reps[0].rdb.Exists(t.Context(), keys.fair(gate)).Result(); err != nil || n != 0 {
		t.Errorf("fair state %s after every release: EXISTS = %d, %v; want 0 (dropped with the queue)", keys.fair(gate), n, err)
	}
	var admitted int64
	for _, r := range reps {
		admitted += r.Totals().Admitted
	}
	if admitted != 60 {
		t.Errorf("admitted %d, want 60", admitted)
	}
}

// TestFIFOAcrossReplicas: waiters queued on replica A before those on B are
// admitted first, in ticket order, whichever replica holds them.
func TestFIFOAcrossReplicas(t *testing.T) {
	const gate = "model:c1:m"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{})
	a, b := reps[0], reps[1]
	req := admission.Request{Gates: path("connection:c1", gate), MaxWait: 10 * time.Second}
	holder := mustTryAcquire(t, a, req)

	order := make(chan string, 4)
	var wg sync.WaitGroup
	for i, w := range []struct {
		name string
		c    *Controller
	}{{"a1", a}, {"b1", b}, {"a2", a}, {"b2", b}} {
		wg.Go(func() {
			p, err := w.c.Acquire(t.Context(), req)
			if err != nil {
				t.Errorf("%s: %v", w.name, err)
				order <- w.name + " failed"
				return
			}
			order <- w.name
			p.Release()
		})
		waitFor(t, 5*time.Second, w.name+" queued", func() bool { return zcard(t, a.rdb, a.keys.queue(gate)) == i+1 })
	}
	if _, ok := b.TryAcquire(req); ok {
		t.Fatal("a newcomer was admitted past four waiters")
	}
	holder.Release()
	wg.Wait()
	close(order)
	var got []string
	for name := range order {
		got = append(got, name)
	}
	if diff := cmp.Diff([]string{"a1", "b1", "a2", "b2"}, got); diff != "" {
		t.Errorf("admission order mismatch (-want +got):\n%s", diff)
	}
}

// TestDeadReplicaLosesLeases: a replica that stops renewing (its client is
// closed, nothing released) holds its slots only until the lease TTL runs out.
func TestDeadReplicaLosesLeases(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 2, map[string]int{gate: 2}, Options{LeaseTTL: time.Second})
	dead, alive := reps[0], reps[1]
	// The wait bound is ten TTLs: a hang guard for slots held forever, not a
	// timing (when they came back is logged).
	req := admission.Request{Gates: path(gate), MaxWait: 10 * time.Second}
	var held []admission.Grant
	for range 2 {
		p, ok := dead.TryAcquire(req)
		if !ok {
			t.Fatal("TryAcquire on the dying replica failed")
		}
		held = append(held, p)
	}
	if _, ok := alive.TryAcquire(req); ok {
		t.Fatal("TryAcquire succeeded on a full gate")
	}
	if err := dead.rdb.Close(); err != nil {
		t.Fatal(err)
	}
	died := time.Now()
	r := recv(t, acquireAsync(t.Context(), alive, req), 12*time.Second)
	if r.err != nil {
		t.Fatalf("Acquire after the owner died: %v (after %s), want the slot back once the 1s lease ran out", r.err, time.Since(died))
	}
	t.Logf("slot came back %s after the owner died (TTL 1s)", time.Since(died))
	r.p.Release()
	for _, p := range held {
		p.Release() // the dead replica's client is closed: nothing happens in Redis
	}
}

// TestTimeoutQueueFullCancel: the typed errors and their bookkeeping match
// package admission, and a waiter that gives up leaves the queue in Redis.
func TestTimeoutQueueFullCancel(t *testing.T) {
	const conn, model = "connection:c1", "model:c1:m"
	reps := replicas(t, 2, map[string]int{model: 1}, Options{})
	a, b := reps[0], reps[1]
	base := admission.Request{Gates: path("provider:p", conn, model)}
	holder := mustTryAcquire(t, a, base)
	defer holder.Release()

	req := base
	req.MaxWait = 150 * time.Millisecond
	_, err := b.Acquire(t.Context(), req)
	var ae *admission.Error
	if !errors.As(err, &ae) || !errors.Is(err, admission.ErrTimeout) {
		t.Fatalf("Acquire = %v, want a SEMAPHORE_TIMEOUT *admission.Error", err)
	}
	if diff := cmp.Diff(admission.GateRef{Level: "model", Key: model}, ae.Gate); diff != "" {
		t.Errorf("timeout gate mismatch (-want +got):\n%s", diff)
	}
	if ae.Waited < req.MaxWait || ae.RetryAfterSeconds() < 1 {
		t.Errorf("Waited %s RetryAfter %s: want ≥ %s and ≥ 1s", ae.Waited, ae.RetryAfter, req.MaxWait)
	}
	if n := zcard(t, a.rdb, a.keys.queue(model)); n != 0 {
		t.Errorf("queue holds %d after the timeout, want 0", n)
	}

	// One waiter (depth 1 on the connection) fills the queue for everyone.
	deep := base
	deep.MaxQueueDepth = 1
	ctx, cancel := context.WithCancel(t.Context())
	waiting := acquireAsync(ctx, a, deep)
	waitFor(t, 5*time.Second, "first waiter queued", func() bool { return zcard(t, a.rdb, a.keys.queue(model)) == 1 })
	_, err = b.Acquire(t.Context(), deep)
	if !errors.As(err, &ae) || ae.Code != admission.CodeQueueFull {
		t.Fatalf("Acquire on a full queue = %v, want SEMAPHORE_QUEUE_FULL", err)
	}
	if diff := cmp.Diff(admission.GateRef{Level: "connection", Key: conn}, ae.Gate); diff != "" {
		t.Errorf("queue-full gate mismatch (-want +got):\n%s", diff)
	}
	if n := zcard(t, a.rdb, a.keys.queue(model)); n != 1 {
		t.Errorf("queue holds %d after a rejection, want 1 (nothing enqueued)", n)
	}

	endWaiter(t, cancel, waiting)
	for _, k := range []string{a.keys.queue(model), a.keys.expiry(model), a.keys.waiting(conn)} {
		if n := zcard(t, a.rdb, k); n != 0 {
			t.Errorf("%s holds %d after the cancel, want 0", k, n)
		}
	}
	gotTotals := []admission.Totals{a.Totals(), b.Totals()}
	wantTotals := []admission.Totals{{Admitted: 1, Cancels: 1}, {Timeouts: 1, QueueFull: 1}}
	if diff := cmp.Diff(wantTotals, gotTotals); diff != "" {
		t.Errorf("totals mismatch (-want +got):\n%s", diff)
	}
}

// TestDoubleRelease: a second Release never frees another request's slot.
func TestDoubleRelease(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{})
	req := admission.Request{Gates: path(gate)}
	p1, ok := reps[0].TryAcquire(req)
	if !ok {
		t.Fatal("first TryAcquire failed")
	}
	p1.Release()
	p2, ok := reps[1].TryAcquire(req)
	if !ok {
		t.Fatal("TryAcquire after a release failed")
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(p1.Release)
	}
	wg.Wait()
	if n := zcard(t, reps[0].rdb, reps[0].keys.holders(gate)); n != 1 {
		t.Errorf("holders = %d after a stale double release, want 1", n)
	}
	if _, ok := reps[0].TryAcquire(req); ok {
		t.Error("a stale release freed the slot another replica holds")
	}
	p2.Release()
}

// TestSetCaps: every replica applies the same snapshot; a raised cap admits
// waiters on other replicas at once, a lowered cap admits nobody until the
// cluster-wide count is below it.
func TestSetCaps(t *testing.T) {
	const gate = "connection:c1"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{Recheck: time.Minute}) // wake-ups must come from SetCaps or messages
	a, b := reps[0], reps[1]
	req := admission.Request{Gates: path(gate), MaxWait: 10 * time.Second}
	p1, ok := a.TryAcquire(req)
	if !ok {
		t.Fatal("TryAcquire failed")
	}
	waiting := acquireAsync(t.Context(), b, req)
	waitFor(t, 5*time.Second, "waiter queued", func() bool { return zcard(t, a.rdb, a.keys.queue(gate)) == 1 })

	raised := map[string]int{gate: 2}
	a.SetCaps(raised)
	b.SetCaps(raised)
	r := recv(t, waiting, 5*time.Second)
	if r.err != nil {
		t.Fatalf("waiter after a raised cap: %v", r.err)
	}
	p2 := r.p

	lowered := map[string]int{gate: 1}
	a.SetCaps(lowered)
	b.SetCaps(lowered)
	p1.Release()
	if _, ok := b.TryAcquire(req); ok {
		t.Fatal("admitted while the cluster still holds the lowered cap")
	}
	p2.Release()
	p3, ok := b.TryAcquire(req)
	if !ok {
		t.Fatal("not admitted once the count fell below the lowered cap")
	}
	p3.Release()

	// a admitted p1 at once: one admission, in the histogram's no-wait bucket
	if diff := cmp.Diff([]admission.GateStats{{Key: gate, Level: "connection", Cap: 1, Admitted: 1, Waits: live.WaitHistogram{0: 1}}},
		a.Stats(), ignoreHold()); diff != "" {
		t.Errorf("Stats mismatch (-want +got):\n%s", diff)
	}
}

// TestEmptyAndMalformedPaths mirrors package admission.
func TestEmptyAndMalformedPaths(t *testing.T) {
	c := replicas(t, 1, nil, Options{})[0]
	tests := []struct {
		name    string
		gates   []admission.GateRef
		wantErr bool
	}{
		{name: "empty path", gates: nil},
		{name: "uncapped gates", gates: path("global", "connection:x")},
		{name: "gate twice", gates: path("global", "global"), wantErr: true},
		{name: "empty key", gates: []admission.GateRef{{Level: "global"}}, wantErr: true},
		{name: "too long", gates: path("a", "b", "c", "d", "e", "f", "g", "h", "i"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := c.Acquire(t.Context(), admission.Request{Gates: tt.gates})
			if (err != nil) != tt.wantErr {
				t.Fatalf("Acquire err = %v, want error %v", err, tt.wantErr)
			}
			if err == nil {
				p.Release()
				p.Release()
			}
		})
	}
}

func ignoreHold() cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool {
		return p.Last().String() == ".MeanHold" || p.Last().String() == ".WaitTotal"
	}, cmp.Ignore())
}

// heldOnOneReplica starts two replicas (re-checks a minute apart, so only pub/sub
// wakes a waiter in a test's time) sharing gate with cap 1, waits until both listen
// on its channel, and has a hold the slot: holder, for req.
func heldOnOneReplica(t *testing.T, gate string) (a, b *Controller, req admission.Request, holder admission.Grant) {
	t.Helper()
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{Recheck: time.Minute})
	a, b = reps[0], reps[1]
	channel := a.keys.channel(gate)
	waitFor(t, 5*time.Second, "both replicas subscribed", func() bool {
		n, err := a.rdb.PubSubNumSub(t.Context(), channel).Result()
		return err == nil && n[channel] == 2
	})
	req = admission.Request{Gates: path(gate), MaxWait: 30 * time.Second}
	holder, ok := a.TryAcquire(req)
	if !ok {
		t.Fatal("TryAcquire failed")
	}
	return a, b, req, holder
}

// A release whose wake-up message reaches a replica after its acquire script queued a
// request but before the request is parked locally must still wake that request: it
// re-checks at once instead of at the next periodic re-check (a minute here).
func TestWakeBetweenQueueAndParkIsNotLost(t *testing.T) {
	const gate = "connection:c1"
	_, b, req, holder := heldOnOneReplica(t, gate)
	wakes := func() uint64 {
		b.mu.Lock()
		defer b.mu.Unlock()
		if g := b.gates[gate]; g != nil {
			return g.wakes
		}
		return 0
	}
	before := wakes()
	// Between B's script and its local park: A releases, and B hears the message
	// while nobody is parked to be kicked.
	heard := make(chan bool, 1)
	b.queuedHook = func() {
		holder.Release()
		// Runs on the Acquire goroutine, so it reports instead of failing the test.
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for deadline := time.Now().Add(5 * time.Second); wakes() == before && time.Now().Before(deadline); {
			<-tick.C
		}
		heard <- wakes() > before
	}
	waiting := acquireAsync(t.Context(), b, req)
	if !<-heard {
		t.Fatal("B never heard the release's wake-up message")
	}
	r := recv(t, waiting, 10*time.Second) // far below the one-minute re-check
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	r.p.Release()
}

// A cap raised on a replica between its acquire script (which queued a request
// under the old cap) and the request's local park must still let the request in at
// once, not at the next periodic re-check (a minute here): the raise counts as a
// wake-up the parking waiter sees it missed.
func TestRaisedCapBetweenQueueAndParkIsNotLost(t *testing.T) {
	const gate = "connection:c1"
	_, b, req, holder := heldOnOneReplica(t, gate)
	defer holder.Release()
	b.queuedHook = func() { b.SetCaps(map[string]int{gate: 2}) }
	r := recv(t, acquireAsync(t.Context(), b, req), 10*time.Second) // far below the one-minute re-check
	if r.err != nil {
		t.Fatalf("waiter after a raised cap: %v", r.err)
	}
	r.p.Release()
}

// TestReleaseWakesOtherReplica: with periodic re-checks out of the picture,
// a release on one replica wakes a waiter on another through pub/sub.
func TestReleaseWakesOtherReplica(t *testing.T) {
	const gate = "connection:c1"
	a, b, req, holder := heldOnOneReplica(t, gate)
	waiting := acquireAsync(t.Context(), b, req)
	waitFor(t, 5*time.Second, "waiter queued", func() bool { return zcard(t, a.rdb, a.keys.queue(gate)) == 1 })
	holder.Release()
	r := recv(t, waiting, 10*time.Second) // far below the one-minute re-check
	if r.err != nil {
		t.Fatalf("waiter: %v", r.err)
	}
	if w := r.p.Waited(); w <= 0 {
		t.Errorf("Waited() = %s, want > 0 for a queued request", w)
	}
	r.p.Release()
}

// mustTryAcquire is c.TryAcquire(req) on gates with room, failing the test if it
// does not admit.
func mustTryAcquire(t *testing.T, c *Controller, req admission.Request) admission.Grant {
	t.Helper()
	g, ok := c.TryAcquire(req)
	if !ok {
		t.Fatal("TryAcquire on an idle gate failed")
	}
	return g
}
