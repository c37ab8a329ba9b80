package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/google/go-cmp/cmp"
)

func TestCapFourOfEight(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 4})
	req := Request{Gates: refs("global", "provider:p", "connection:c1", "model:c1:m")}
	var results []<-chan result
	for range 8 {
		results = append(results, acquireAsync(t.Context(), c, req))
	}
	waitFor(t, "4 in flight and 4 queued", func() bool {
		s := gateStat(t, c, "connection:c1")
		return s.InFlight == 4 && s.Queued == 4
	})
	var held, waiting []<-chan result
	for _, ch := range results {
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("Acquire: %v", r.err)
			}
			held = append(held, okChan(r))
		default:
			waiting = append(waiting, ch)
		}
	}
	if len(held) != 4 || len(waiting) != 4 {
		t.Fatalf("admitted %d, waiting %d; want 4 and 4", len(held), len(waiting))
	}
	// Each release admits exactly one waiter.
	for i := range 4 {
		recv(t, held[i]).p.Release()
		waitFor(t, "one more admitted", func() bool {
			s := gateStat(t, c, "connection:c1")
			return s.InFlight == 4 && s.Queued == 3-i
		})
	}
	for _, ch := range waiting {
		r := recv(t, ch)
		if r.err != nil {
			t.Fatalf("Acquire: %v", r.err)
		}
		r.p.Release()
	}
	if s := gateStat(t, c, "connection:c1"); s.InFlight != 0 || s.Admitted != 8 {
		t.Fatalf("after releases: in flight %d, admitted %d; want 0 and 8", s.InFlight, s.Admitted)
	}
}

// okChan wraps a result back into a channel.
func okChan(r result) <-chan result {
	ch := make(chan result, 1)
	ch <- r
	return ch
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"model:c1:m": 1})
	holder := mustAcquire(t, c, "connection:c1", "model:c1:m")
	defer holder.Release()

	start := time.Now()
	p, err := c.Acquire(t.Context(), Request{Gates: refs("connection:c1", "model:c1:m"), MaxWait: 100 * time.Millisecond})
	elapsed := time.Since(start)
	if p != nil {
		t.Fatal("Acquire returned a permit, want a timeout")
	}
	var ae *Error
	if !errors.As(err, &ae) || !errors.Is(err, ErrTimeout) || errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want an *Error matching ErrTimeout only", err)
	}
	if diff := cmp.Diff(GateRef{Level: "model", Key: "model:c1:m"}, ae.Gate); diff != "" {
		t.Errorf("blocking gate mismatch (-want +got):\n%s", diff)
	}
	// A lower bound the controller enforces (a timer never fires early), so a
	// slow machine cannot break it; how much later it fired is load, logged.
	t.Logf("gave up after %v", elapsed)
	if elapsed < 100*time.Millisecond || ae.Waited < 100*time.Millisecond {
		t.Errorf("gave up after %v (error says %v), want >= 100ms", elapsed, ae.Waited)
	}
	if ae.Code != CodeTimeout || ae.RetryAfterSeconds() < 1 {
		t.Errorf("code %q, retry after %ds; want %q and >= 1", ae.Code, ae.RetryAfterSeconds(), CodeTimeout)
	}
	s := gateStat(t, c, "model:c1:m")
	if s.Timeouts != 1 || s.Queued != 0 || s.Waiting != 0 {
		t.Errorf("stats timeouts %d queued %d waiting %d; want 1, 0, 0", s.Timeouts, s.Queued, s.Waiting)
	}
}

// heldGate returns a controller whose one gate, connection:c1 (cap 1), is held
// until the test ends, so the next request on it has to wait.
func heldGate(t *testing.T) *Controller {
	t.Helper()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 1})
	t.Cleanup(mustAcquire(t, c, "connection:c1").Release)
	return c
}

func TestCancel(t *testing.T) {
	t.Parallel()
	c := heldGate(t)

	ctx, cancel := context.WithCancel(t.Context())
	ch := acquireAsync(ctx, c, Request{Gates: refs("connection:c1"), MaxWait: time.Minute})
	waitQueued(t, c, "connection:c1", 1)
	cancel()
	r := recv(t, ch)
	if !errors.Is(r.err, context.Canceled) || r.p != nil {
		t.Fatalf("Acquire = %v, %v; want nil, context.Canceled", r.p, r.err)
	}
	var ae *Error
	if errors.As(r.err, &ae) {
		t.Fatalf("cancel returned an *Error %v", ae)
	}
	s := gateStat(t, c, "connection:c1")
	want := GateStats{Key: "connection:c1", Level: "connection", Cap: 1, InFlight: 1, Admitted: 1, Cancels: 1, Waits: live.WaitHistogram{0: 1}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("stats mismatch (-want +got):\n%s", diff)
	}
}

func TestContextDeadlineIsACancel(t *testing.T) {
	t.Parallel()
	c := heldGate(t)

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Acquire(ctx, Request{Gates: refs("connection:c1"), MaxWait: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want context.DeadlineExceeded (the ctx deadline came first)", err)
	}
	if s := gateStat(t, c, "connection:c1"); s.Cancels != 1 || s.Timeouts != 0 {
		t.Errorf("cancels %d timeouts %d, want 1 and 0", s.Cancels, s.Timeouts)
	}
}

func TestNoHeadOfLineBlocking(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		caps     map[string]int
		busy     []string // path saturated by a holder plus a waiter
		other    []string // must be admitted at once
		blocking string   // where the waiter parks
	}{
		{
			name:     "providers",
			caps:     map[string]int{"provider:a": 1, "provider:b": 1},
			busy:     []string{"global", "provider:a", "connection:a1", "model:a1:m"},
			other:    []string{"global", "provider:b", "connection:b1", "model:b1:m"},
			blocking: "provider:a",
		},
		{
			name:     "models on one connection",
			caps:     map[string]int{"connection:c1": 10, "model:c1:a": 1, "model:c1:b": 1},
			busy:     []string{"global", "provider:p", "connection:c1", "model:c1:a"},
			other:    []string{"global", "provider:p", "connection:c1", "model:c1:b"},
			blocking: "model:c1:a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := New(Options{})
			c.SetCaps(tt.caps)
			holder := mustAcquire(t, c, tt.busy...)
			ctx, cancel := context.WithCancel(t.Context())
			var waiters []<-chan result
			for range 3 {
				waiters = append(waiters, acquireAsync(ctx, c, Request{Gates: refs(tt.busy...)}))
			}
			waitQueued(t, c, tt.blocking, 3)
			p := mustAcquire(t, c, tt.other...)
			p.Release()
			cancel()
			for _, ch := range waiters {
				if r := recv(t, ch); !errors.Is(r.err, context.Canceled) {
					t.Errorf("waiter: %v, want context.Canceled", r.err)
				}
			}
			holder.Release()
		})
	}
}

func TestConnectionCapBindsSiblings(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 1, "model:c1:b": 5})
	path := refs("global", "provider:p", "connection:c1", "model:c1:b")
	first, err := c.Acquire(t.Context(), Request{Gates: path})
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	_, err = c.Acquire(t.Context(), Request{Gates: path, MaxWait: 100 * time.Millisecond})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeTimeout || ae.Gate.Key != "connection:c1" {
		t.Fatalf("second Acquire: %v, want SEMAPHORE_TIMEOUT on connection:c1", err)
	}
	first.Release()
	second, err := c.Acquire(t.Context(), Request{Gates: path, MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	second.Release()
}

func TestDoubleRelease(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 1})
	a := mustAcquire(t, c, "connection:c1")
	a.Release()
	b := mustAcquire(t, c, "connection:c1")
	a.Release() // must not free b's slot
	if _, ok := c.TryAcquire(Request{Gates: refs("connection:c1")}); ok {
		t.Fatal("a stale double release freed the slot another request holds")
	}
	if s := gateStat(t, c, "connection:c1"); s.InFlight != 1 {
		t.Fatalf("in flight %d, want 1", s.InFlight)
	}
	b.Release()
	b.Release()
	if s := gateStat(t, c, "connection:c1"); s.InFlight != 0 {
		t.Fatalf("in flight %d after release, want 0", s.InFlight)
	}
}

func TestConcurrentReleaseFreesOnce(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 2})
	a := mustAcquire(t, c, "connection:c1")
	b := mustAcquire(t, c, "connection:c1")
	done := make(chan struct{})
	for range 4 {
		go func() {
			a.Release()
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
	if s := gateStat(t, c, "connection:c1"); s.InFlight != 1 {
		t.Fatalf("in flight %d, want 1 (only a's slot freed)", s.InFlight)
	}
	b.Release()
}

func TestNoGatesNoCaps(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	p, err := c.Acquire(t.Context(), Request{})
	if err != nil || p == nil {
		t.Fatalf("Acquire with no gates = %v, %v; want a permit", p, err)
	}
	if p.Waited() != 0 {
		t.Errorf("Waited = %v, want 0", p.Waited())
	}
	p.Release()
	p.Release()
	var nilPermit *Permit
	nilPermit.Release()

	// Gates that no config caps never block, but they count in-flight.
	var held []*Permit
	for range 100 {
		held = append(held, mustAcquire(t, c, "global", "connection:c1"))
	}
	if s := gateStat(t, c, "connection:c1"); s.InFlight != 100 || s.Cap != 0 {
		t.Fatalf("connection:c1 in flight %d cap %d, want 100 and 0", s.InFlight, s.Cap)
	}
	for _, p := range held {
		p.Release()
	}
	c.SetCaps(nil) // idle uncapped gates are dropped
	if got := c.Stats(); len(got) != 0 {
		t.Fatalf("Stats after idle sweep = %v, want none", got)
	}
}

// fakeClock is a manual clock for deterministic tests.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time          { return f.t }
func (f *fakeClock) advance(d time.Duration) { f.t = f.t.Add(d) }

// mustSubmit admits req at once (c.mu held).
func mustSubmit(t *testing.T, c *Controller, req Request, p *Permit) {
	t.Helper()
	w, err := c.submit(t.Context(), &req, p)
	if err != nil || w != nil {
		t.Fatalf("submit = %v, %v; want an immediate admission", w, err)
	}
}

// mustPark submits req and expects it to be parked (c.mu held).
func mustPark(t *testing.T, c *Controller, req Request, p *Permit) *waiter {
	t.Helper()
	w, err := c.submit(t.Context(), &req, p)
	if err != nil || w == nil {
		t.Fatalf("submit = %v, %v; want a parked waiter", w, err)
	}
	return w
}

func TestMalformedPath(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	tests := []struct {
		name string
		path []GateRef
	}{
		{name: "duplicate", path: refs("connection:c1", "connection:c1")},
		{name: "too long", path: refs("a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7", "a:8", "a:9")},
		{name: "empty key", path: []GateRef{{Level: "global"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Acquire(t.Context(), Request{Gates: tt.path}); err == nil {
				t.Fatal("Acquire accepted a malformed path")
			}
		})
	}
	// The longest path allowed is accepted.
	p, err := c.Acquire(t.Context(), Request{Gates: refs("a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7", "a:8")})
	if err != nil {
		t.Fatalf("Acquire refused a path of %d gates: %v", maxPath, err)
	}
	p.Release()
}

// TestZeroCapOfUnknownGateAddsNoGate: a cap of 0 (uncapped) for a gate that no
// request has used yet adds nothing to the gates listed; a positive one does.
func TestZeroCapOfUnknownGateAddsNoGate(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 0, "connection:c2": 1})
	var keys []string
	for _, s := range c.Stats() {
		keys = append(keys, s.Key)
	}
	if diff := cmp.Diff([]string{"connection:c2"}, keys); diff != "" {
		t.Errorf("gates listed (-want +got):\n%s", diff)
	}
}

func TestStatsSortedAndCappedIdleListed(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"model:c1:b": 2, "connection:c1": 3})
	p := mustAcquire(t, c, "global", "connection:c1", "model:c1:a")
	got := c.Stats()
	// admitted at once: counted in the histogram's no-wait bucket
	want := []GateStats{
		{Key: "connection:c1", Level: "connection", Cap: 3, InFlight: 1, Admitted: 1, Waits: live.WaitHistogram{0: 1}},
		{Key: "global", Level: "global", InFlight: 1, Admitted: 1, Waits: live.WaitHistogram{0: 1}},
		{Key: "model:c1:a", Level: "model", InFlight: 1, Admitted: 1, Waits: live.WaitHistogram{0: 1}},
		{Key: "model:c1:b", Level: "model", Cap: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stats mismatch (-want +got):\n%s", diff)
	}
	p.Release()
	c.SetCaps(map[string]int{"model:c1:b": 2, "connection:c1": 3})
	keys := []string{}
	for _, s := range c.Stats() {
		keys = append(keys, s.Key)
	}
	if diff := cmp.Diff([]string{"connection:c1", "model:c1:b"}, keys); diff != "" {
		t.Errorf("gates after sweep (-want +got):\n%s", diff)
	}
}

// A permit names the full gate its request queued behind (traces report it),
// and none when it was admitted at once.
func TestPermitBlockedBy(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"model:c1:m": 1})
	req := Request{Gates: refs("global", "connection:c1", "model:c1:m")}
	first, err := c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.BlockedBy(); got != "" {
		t.Errorf("admitted at once: BlockedBy = %q, want none", got)
	}
	ch := acquireAsync(t.Context(), c, req)
	waitFor(t, "one queued", func() bool { return gateStat(t, c, "model:c1:m").Queued == 1 })
	first.Release()
	r := recv(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.p.Release()
	if got := r.p.BlockedBy(); got != "model:c1:m" {
		t.Errorf("queued: BlockedBy = %q, want model:c1:m", got)
	}
}
