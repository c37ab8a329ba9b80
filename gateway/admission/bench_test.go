package admission

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// benchPath is a realistic 4-gate path: uuid-like connection id, every gate capped.
var benchKeys = []string{
	"global",
	"provider:zai",
	"connection:6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41",
	"model:6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41:glm-5",
}

func benchCaps() map[string]int {
	return map[string]int{benchKeys[0]: 1000, benchKeys[1]: 500, benchKeys[2]: 100, benchKeys[3]: 50}
}

// BenchmarkAcquireRelease is the uncontended acquire+release of a 4-gate
// path, prepared (Prepare) as the gateway prepares its per-target requests.
func BenchmarkAcquireRelease(b *testing.B) {
	benchAcquireRelease(b, Prepare(Request{Gates: refs(benchKeys...), MaxWait: 30 * time.Second}))
}

// BenchmarkAcquireReleaseByKey is BenchmarkAcquireRelease with a request
// that is not prepared: one map lookup by key per gate.
func BenchmarkAcquireReleaseByKey(b *testing.B) {
	benchAcquireRelease(b, Request{Gates: refs(benchKeys...), MaxWait: 30 * time.Second})
}

// benchAcquireRelease acquires and releases req on an idle controller with
// benchCaps, one request at a time.
func benchAcquireRelease(b *testing.B, req Request) {
	c := New(Options{})
	c.SetCaps(benchCaps())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Acquire(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

// BenchmarkWeighted4 is the baseline: four x/sync semaphores acquired in order.
func BenchmarkWeighted4(b *testing.B) {
	var sems [4]*semaphore.Weighted
	for i, n := range []int64{1000, 500, 100, 50} {
		sems[i] = semaphore.NewWeighted(n)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range sems {
			if err := s.Acquire(ctx, 1); err != nil {
				b.Fatal(err)
			}
		}
		for i := len(sems) - 1; i >= 0; i-- {
			sems[i].Release(1)
		}
	}
}

// BenchmarkChan4 is the baseline: four buffered-channel semaphores.
func BenchmarkChan4(b *testing.B) {
	var sems [4]chan struct{}
	for i, n := range []int{1000, 500, 100, 50} {
		sems[i] = make(chan struct{}, n)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range sems {
			s <- struct{}{}
		}
		for i := len(sems) - 1; i >= 0; i-- {
			<-sems[i]
		}
	}
}

// BenchmarkContended keeps a backlog of about n waiters (n+4 goroutines,
// each acquiring and releasing in a loop) on a 4-gate path whose model cap
// is 4, all of one client: an op is one acquire+release, most of them
// parked and admitted by a release. BenchmarkFairShare is the same with the
// goroutines spread over client keys of mixed weights.
func BenchmarkContended(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) { benchBacklog(b, n, []int{1}, nil, 0) })
	}
}

// BenchmarkFairShare is BenchmarkContended with four client keys of weights
// 1, 2, 3 and 5 backlogged on the same gate: every admission from the queue
// goes through the fair-share tags.
func BenchmarkFairShare(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) { benchBacklog(b, n, []int{1, 2, 3, 5}, nil, 0) })
	}
}

// BenchmarkPriority is BenchmarkContended with the goroutines spread over
// the three priority classes (one client key): every admission from the
// queue serves the highest class, and with an aging period of 10 ms the
// lower classes of the 10 000-waiter backlog (a turn of it takes tens of
// milliseconds) are served by moving up, so aging runs too.
func BenchmarkPriority(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			benchBacklog(b, n, []int{1}, Priorities[:], 10*time.Millisecond)
		})
	}
}

// benchBacklog runs n+4 goroutines over benchKeys with caps 64/32/8/4, the
// i-th of them for client key i mod len(weights) with that weight, and of
// priority i mod len(priorities) (none: standard; aging 0: the default), until
// b.N acquire+release pairs are done. The goroutines start parked behind
// four holders, so the backlog is full from the first op; when b.N ops are
// done the timer stops and the rest are cancelled.
func benchBacklog(b *testing.B, n int, weights []int, priorities []Priority, aging time.Duration) {
	c := New(Options{PriorityAging: aging})
	c.SetCaps(map[string]int{benchKeys[0]: 64, benchKeys[1]: 32, benchKeys[2]: 8, benchKeys[3]: 4})
	path := Prepare(Request{Gates: refs(benchKeys...), MaxWait: time.Minute})
	var holders []*Permit
	for range 4 {
		p, ok := c.TryAcquire(path)
		if !ok {
			b.Fatal("holder not admitted")
		}
		holders = append(holders, p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var done atomic.Int64
	reached := make(chan struct{})
	target := int64(b.N)
	var wg sync.WaitGroup
	for i := range n + 4 {
		req := path
		req.Client, req.Weight = fmt.Sprintf("key-%d", i%len(weights)), weights[i%len(weights)]
		if len(weights) == 1 {
			req.Client = ""
		}
		if len(priorities) > 0 {
			req.Priority = priorities[i%len(priorities)]
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				p, err := c.Acquire(ctx, req)
				if err != nil {
					return
				}
				runtime.Gosched()
				p.Release()
				if done.Add(1) == target {
					close(reached)
				}
			}
		})
	}
	for {
		c.mu.Lock()
		parked := c.waiters
		c.mu.Unlock()
		if parked == n+4 {
			break
		}
		runtime.Gosched()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, p := range holders {
		p.Release()
	}
	<-reached
	b.StopTimer()
	cancel()
	wg.Wait()
}

// BenchmarkContendedWeighted4 is the baseline for BenchmarkContended.
func BenchmarkContendedWeighted4(b *testing.B) {
	var sems [4]*semaphore.Weighted
	for i, n := range []int64{64, 32, 8, 4} {
		sems[i] = semaphore.NewWeighted(n)
	}
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			for _, s := range sems {
				if err := s.Acquire(ctx, 1); err != nil {
					b.Error(err)
					return
				}
			}
			runtime.Gosched()
			for i := len(sems) - 1; i >= 0; i-- {
				sems[i].Release(1)
			}
		}
	})
}

// BenchmarkParkedWaiters measures an uncontended acquire+release on one path
// while n waiters are parked on other, full gates.
func BenchmarkParkedWaiters(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) {
			c := New(Options{})
			caps := benchCaps()
			const busyGates = 100
			for i := range busyGates {
				caps[fmt.Sprintf("model:busy:%d", i)] = 1
			}
			c.SetCaps(caps)
			var holders []*Permit
			for i := range busyGates {
				p, ok := c.TryAcquire(Request{Gates: refs("connection:busy", fmt.Sprintf("model:busy:%d", i))})
				if !ok {
					b.Fatal("holder not admitted")
				}
				holders = append(holders, p)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					_, _ = c.Acquire(ctx, Request{Gates: refs("connection:busy", fmt.Sprintf("model:busy:%d", i%busyGates))})
				})
			}
			for {
				c.mu.Lock()
				parked := c.waiters
				c.mu.Unlock()
				if parked == n {
					break
				}
				runtime.Gosched()
			}
			req := Request{Gates: refs(benchKeys...)}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				p, err := c.Acquire(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				p.Release()
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			for _, p := range holders {
				p.Release()
			}
		})
	}
}

// parkBehind parks n waiters on path [global, connection:busy] without
// goroutines (white-box, like the fuzz target), while hg holds the only
// global slot and hc the only connection slot: the scenario of issue 17,
// n requests parked on the global gate behind a full connection gate.
// It returns the controller, the two holders and the parked requests.
func parkBehind(tb testing.TB, n int) (c *Controller, hg, hc *Permit, parked []*waiter) {
	tb.Helper()
	c = New(Options{})
	c.SetCaps(map[string]int{"global": 1, "connection:busy": 1})
	var ok bool
	if hg, ok = c.TryAcquire(Request{Gates: refs("global")}); !ok {
		tb.Fatal("global holder not admitted")
	}
	if hc, ok = c.TryAcquire(Request{Gates: refs("connection:busy")}); !ok {
		tb.Fatal("connection holder not admitted")
	}
	req := Request{Gates: refs("global", "connection:busy")}
	c.mu.Lock()
	defer c.mu.Unlock()
	parked = make([]*waiter, n)
	for i := range parked {
		w, err := c.submit(context.Background(), &req, &Permit{})
		if err != nil || w == nil {
			tb.Fatalf("submit = %v, %v; want a parked waiter", w, err)
		}
		parked[i] = w
	}
	return c, hg, hc, parked
}

// BenchmarkReleaseWithParkedBehind releases one global slot while n
// requests are parked on the global gate behind a full connection gate,
// and then one connection slot while they are parked on the connection
// behind the full global gate; each holder takes its slot back at once, so
// every iteration starts from the same state and does two releases that
// each find all n waiters blocked. ns/op is for both releases (and the two
// TryAcquires that take the slots back).
func BenchmarkReleaseWithParkedBehind(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("parked=%d", n), func(b *testing.B) {
			c, hg, hc, _ := parkBehind(b, n)
			global, conn := Request{Gates: refs("global")}, Request{Gates: refs("connection:busy")}
			b.ReportAllocs()
			for b.Loop() {
				// Each holder's Permit is free once released: the slot is
				// taken back into it (TryAcquireInto), so nothing allocates.
				hg.Release()
				if !c.TryAcquireInto(global, hg) {
					b.Fatal("global slot not taken back")
				}
				hc.Release()
				if !c.TryAcquireInto(conn, hc) {
					b.Fatal("connection slot not taken back")
				}
			}
		})
	}
}

// BenchmarkQueueCycle is the queue's own cost under a backlog, without
// goroutines or scheduling (white-box, like parkBehind): n waiters of keys
// client keys (weights 1, 2, 3, 5) are parked on a cap-4 model gate; an op
// releases the oldest permit, which admits the gate's next waiter, collects
// it, and parks a new waiter of the same key, so the backlog stays at n.
// keys=1 is the queue before fair share in effect (one flow, arrival
// order); keys=4 goes through the fair-share tags on every admission.
func BenchmarkQueueCycle(b *testing.B) {
	for _, keys := range []int{1, 4} {
		for _, n := range []int{10, 10000} {
			b.Run(fmt.Sprintf("keys=%d/waiters=%d", keys, n), func(b *testing.B) { benchQueueCycle(b, keys, n) })
		}
	}
}

func benchQueueCycle(b *testing.B, keys, n int) {
	c := New(Options{})
	c.SetCaps(map[string]int{benchKeys[0]: 64, benchKeys[1]: 32, benchKeys[2]: 8, benchKeys[3]: 4})
	base := Prepare(Request{Gates: refs(benchKeys...)})
	reqs := make([]Request, keys)
	for i := range reqs {
		reqs[i] = base
		if keys > 1 {
			reqs[i].Client, reqs[i].Weight = fmt.Sprintf("key-%d", i), []int{1, 2, 3, 5}[i]
		}
	}
	held := make([]*Permit, 0, 4) // a ring: oldest first
	for range 4 {
		p, ok := c.TryAcquire(base)
		if !ok {
			b.Fatal("holder not admitted")
		}
		held = append(held, p)
	}
	client := make(map[*waiter]int, n)
	var scratch Permit
	c.mu.Lock()
	for i := range n {
		w, err := c.submit(context.Background(), &reqs[i%keys], &scratch)
		if err != nil || w == nil {
			b.Fatalf("submit = %v, %v; want a parked waiter", w, err)
		}
		client[w] = i % keys
	}
	c.mu.Unlock()
	g := c.gates[benchKeys[3]]
	b.ReportAllocs()
	for b.Loop() {
		c.mu.Lock()
		w := g.queue.first().head // one class of standard requests: nothing ages in a benchmark's time
		c.mu.Unlock()
		p := held[0]
		copy(held, held[1:])
		p.Release()
		c.mu.Lock()
		if w.state != stateAdmitted {
			b.Fatal("the gate's next waiter was not admitted")
		}
		*p = Permit{} // p is free once released: the admission lands in it
		c.collect(w, p)
		k := client[w]
		delete(client, w)
		c.recycle(w)
		nw, err := c.submit(context.Background(), &reqs[k], &scratch)
		if err != nil || nw == nil {
			b.Fatalf("submit = %v, %v; want a parked waiter", nw, err)
		}
		client[nw] = k
		c.mu.Unlock()
		held[3] = p
	}
}
