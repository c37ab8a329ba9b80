package cluster

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/redis/go-redis/v9"
)

// admittedAs is a grant and the name of the request it admitted.
type admittedAs struct {
	name string
	p    admission.Grant
}

// acquireNamed acquires req on c in the background and sends the grant,
// named, to out (an error fails the test).
func acquireNamed(t *testing.T, c *Controller, req admission.Request, name string, out chan<- admittedAs) {
	go func() {
		p, err := c.Acquire(t.Context(), req)
		if err != nil {
			out <- admittedAs{name: fmt.Sprintf("%s: %v", name, err)}
			return
		}
		out <- admittedAs{name, p}
	}()
}

// next receives the next admission, failing the test after 10 s.
func next(t *testing.T, ch <-chan admittedAs) admittedAs {
	t.Helper()
	select {
	case a := <-ch:
		if a.p == nil {
			t.Fatalf("%s", a.name)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no admission within 10s")
		return admittedAs{}
	}
}

// redisTime is Redis's clock, the one the scripts age waiters by.
func redisTime(t *testing.T, rdb redis.UniversalClient) time.Time {
	t.Helper()
	now, err := rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// TestPriorityInteractiveFirstAcrossReplicas: on a saturated cap-1 gate
// with 50 batch waiters spread over two replicas, an interactive request
// (on the other replica than the holder) is admitted next, then a standard
// one, then the batch waiters in their arrival order; each class waits in
// its own Redis queue, and none is left once everyone went through.
func TestPriorityInteractiveFirstAcrossReplicas(t *testing.T) {
	const gate = "model:c1:m"
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{PriorityAging: time.Hour})
	base := admission.Request{Gates: path("connection:c1", gate), MaxWait: 60 * time.Second}
	holder := mustTryAcquire(t, reps[0], base)
	rdb := reps[0].rdb
	queued := func() int { return zcard(t, rdb, reps[0].keys.expiry(gate)) }

	admits := make(chan admittedAs, 60)
	var batch []string
	for i := range 50 {
		req := base
		req.Client, req.Priority = "B", admission.PriorityBatch
		name := fmt.Sprintf("B%d", i)
		batch = append(batch, name)
		acquireNamed(t, reps[i%2], req, name, admits)
		waitFor(t, 10*time.Second, name+" queued", func() bool { return queued() == i+1 })
	}
	std := base
	std.Client = "S"
	acquireNamed(t, reps[0], std, "S", admits)
	waitFor(t, 10*time.Second, "S queued", func() bool { return queued() == 51 })
	inter := base
	inter.Client, inter.Priority = "I", admission.PriorityInteractive
	acquireNamed(t, reps[1], inter, "I", admits)
	waitFor(t, 10*time.Second, "I queued", func() bool { return queued() == 52 })

	root := reps[0].keys.root
	for key, want := range map[string]int{"qi:": 1, "q:": 1, "qb:": 50} {
		if n := zcard(t, rdb, root+key+gate); n != want {
			t.Errorf("%s%s holds %d waiters, want %d", key, gate, n, want)
		}
	}
	for _, s := range reps[1].Stats() {
		if s.Key == gate && (s.QueuedByPriority[admission.PriorityInteractive] != 1 || s.QueuedByPriority[admission.PriorityBatch] != 25) {
			t.Errorf("replica 1's %s queued by priority %v, want 1 interactive and 25 batch", gate, s.QueuedByPriority)
		}
	}

	holder.Release()
	var order []string
	for range 52 {
		a := next(t, admits)
		order = append(order, a.name)
		a.p.Release()
	}
	if want := append([]string{"I", "S"}, batch...); !slices.Equal(order, want) {
		t.Errorf("admission order %v, want %v", order, want)
	}
	waitFor(t, 10*time.Second, "the queue to empty", func() bool { return queued() == 0 })
	var left []string
	for _, kind := range []string{"q", "qi", "qb", "t", "ti", "tb", "f", "fi", "fb", "x", "a"} {
		if n, err := rdb.Exists(t.Context(), root+kind+":"+gate).Result(); err != nil || n != 0 {
			left = append(left, kind)
		}
	}
	if len(left) > 0 {
		t.Errorf("queue state left in Redis after everyone went through: %v", left)
	}
}

// TestPriorityAgingBoundAcrossReplicas: interactive requests keep a cap-1
// gate full (three always waiting, over two replicas) while one batch
// request waits. It is admitted only once it has waited 2 × the aging
// period, and then at the first release after that: within 2 × aging +
// one hold. Counted on Redis's clock, the one the scripts age waiters by:
// its time is read before each release, and an admission happens after the
// release that frees its slot.
func TestPriorityAgingBoundAcrossReplicas(t *testing.T) {
	const gate = "model:c1:m"
	const aging = 400 * time.Millisecond
	reps := replicas(t, 2, map[string]int{gate: 1}, Options{PriorityAging: aging})
	base := admission.Request{Gates: path("connection:c1", gate), MaxWait: 60 * time.Second}
	rdb := reps[0].rdb
	queued := func() int { return zcard(t, rdb, reps[0].keys.expiry(gate)) }
	held := mustTryAcquire(t, reps[0], base)

	admits := make(chan admittedAs, 64)
	inter := base
	inter.Client, inter.Priority = "I", admission.PriorityInteractive
	sent := 0
	topUp := func(want int) {
		for n := queued(); n < want; n++ {
			acquireNamed(t, reps[sent%2], inter, "I", admits)
			sent++
			waitFor(t, 10*time.Second, "an interactive waiter queued", func() bool { return queued() > n })
		}
	}
	topUp(3)
	before := redisTime(t, rdb)
	low := base
	low.Client, low.Priority = "B", admission.PriorityBatch
	acquireNamed(t, reps[1], low, "B", admits)
	waitFor(t, 10*time.Second, "B queued", func() bool { return queued() == 4 })
	after := redisTime(t, rdb)
	earliest, latest := before.Add(2*aging), after.Add(2*aging) // when B moves up to interactive

	gotI := 0
	for step := 0; ; step++ {
		releasedAt := redisTime(t, rdb)
		held.Release()
		a := next(t, admits)
		held = a.p
		if a.name == "B" {
			if admittedBy := redisTime(t, rdb); admittedBy.Before(earliest) {
				t.Errorf("B admitted by %v after it queued, before it waited 2 × %v", admittedBy.Sub(before), aging)
			}
			t.Logf("B admitted at admission %d, at the release %v after it queued (aging %v, bound 2 × aging + one hold)",
				step+1, releasedAt.Sub(before), aging)
			break
		}
		gotI++
		if !releasedAt.Before(latest) {
			t.Fatalf("an interactive request admitted at admission %d, after a release %v after B queued: B, having waited 2 × %v, should have been",
				step+1, releasedAt.Sub(before), aging)
		}
		topUp(4)
	}
	held.Release()
	for range sent - gotI {
		next(t, admits).p.Release()
	}
}

// TestPriorityAgingFromSettings: a gateway in cluster mode passes the
// settings' priorityAgingMs to its cluster controller (the scripts' aging
// argument), and the default when the setting is removed.
func TestPriorityAgingFromSettings(t *testing.T) {
	ctrl := newController(t, newClient(t, shared.sock), Options{Prefix: uniquePrefix(t)})
	gw := gateway.New(gateway.Options{Admission: ctrl})
	t.Cleanup(gw.Close)
	aging := func() any {
		ctrl.mu.Lock()
		defer ctrl.mu.Unlock()
		return ctrl.agingArg
	}
	if got := aging(); got != int64(10000) {
		t.Errorf("aging before any settings = %v ms, want the default 10000", got)
	}
	gw.Apply(gateway.Config{Settings: limits.Settings{PriorityAgingMs: ptr(1500)}})
	if got := aging(); got != int64(1500) {
		t.Errorf("aging with priorityAgingMs 1500 = %v ms", got)
	}
	gw.Apply(gateway.Config{})
	if got := aging(); got != int64(10000) {
		t.Errorf("aging once priorityAgingMs is removed = %v ms, want the default 10000", got)
	}
}

// TestPriorityWeightsWithinClassAcrossReplicas: keys A (weight 1) and B
// (weight 3), six interactive clients each over two replicas, backlogged on
// a cap-4 gate while a batch key waits too: of the first 200 admissions B
// gets 3 for each of A's, within 15 %, and the batch key none (aging 1 h).
func TestPriorityWeightsWithinClassAcrossReplicas(t *testing.T) {
	const gate = "model:c1:m"
	const total = 200
	reps := replicas(t, 2, map[string]int{gate: 4}, Options{PriorityAging: time.Hour})
	base := admission.Request{Gates: path("connection:c1", gate), MaxWait: 60 * time.Second}
	var held []admission.Grant
	for range 4 {
		held = append(held, mustTryAcquire(t, reps[0], base))
	}
	queued := func() int { return zcard(t, reps[0].rdb, reps[0].keys.expiry(gate)) }
	low := base
	low.Client, low.Priority = "L", admission.PriorityBatch
	var seq atomic.Int64
	lowAt := make(chan int64, 1) // admissions counted when the batch waiter got in
	go func() {
		p, err := reps[1].Acquire(t.Context(), low)
		if err != nil {
			t.Errorf("L: %v", err)
			lowAt <- -1
			return
		}
		lowAt <- seq.Load()
		p.Release()
	}()
	waitFor(t, 10*time.Second, "the batch waiter queued", func() bool { return queued() == 1 })

	var got [2]atomic.Int64 // admissions of A, B among the first total
	var wg sync.WaitGroup
	for i := range 12 {
		key, weight := "A", 1
		if i%2 == 1 {
			key, weight = "B", 3
		}
		req := base
		req.Client, req.Weight, req.Priority = key, weight, admission.PriorityInteractive
		c := reps[(i/2)%2]
		wg.Go(func() {
			for {
				p, err := c.Acquire(t.Context(), req)
				if err != nil {
					t.Errorf("key %s: %v", key, err)
					return
				}
				n := seq.Add(1)
				if n <= total {
					got[weight/3].Add(1)
				}
				if n >= total {
					p.Release()
					return
				}
				p.Release()
			}
		})
	}
	waitFor(t, 10*time.Second, "12 interactive waiters queued", func() bool { return queued() == 13 })
	for _, p := range held {
		p.Release()
	}
	wg.Wait()
	a, b := got[0].Load(), got[1].Load()
	t.Logf("first %d admissions, interactive: A (weight 1) %d, B (weight 3) %d, B/A = %.2f", total, a, b, float64(b)/float64(max(a, 1)))
	if a == 0 || float64(b)/float64(a) < 3*0.85 || float64(b)/float64(a) > 3*1.15 {
		t.Errorf("B/A = %d/%d, want 3 within 15 %% (weights 1:3)", b, a)
	}
	select {
	case n := <-lowAt:
		if n < total {
			t.Errorf("the batch waiter was admitted after %d admissions, while interactive ones waited", n)
		}
	case <-time.After(10 * time.Second):
		t.Error("the batch waiter was not admitted once the interactive ones were done")
	}
}
