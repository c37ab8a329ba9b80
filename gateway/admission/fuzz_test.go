package admission

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

var fuzzPaths = [][]string{
	{"global", "connection:a", "model:a:x"},
	{"global", "connection:a", "model:a:y"},
	{"connection:a", "model:a:x"},
	{"global", "connection:b", "model:b:x"},
	{"connection:b"},
	{},
}

var fuzzGates = []string{"global", "connection:a", "connection:b", "model:a:x", "model:a:y", "model:b:x"}

var fuzzClients = []string{"", "k1", "k2", "k3"}

// fuzzWaiter is a parked request, the permit it will land in and when its
// MaxWait runs out (zero: no MaxWait).
type fuzzWaiter struct {
	w        *waiter
	p        *Permit
	client   string
	priority Priority
	deadline time.Time
}

// effectiveLevel is the level a waiter of priority p that arrived at at
// (Controller.clock) is entitled to at now: its class's, raised one for
// every aging period waited. Written apart from the controller's levelAt.
func effectiveLevel(p Priority, at, now, aging int64) int {
	lv := map[Priority]int{PriorityInteractive: 0, PriorityStandard: 1, PriorityBatch: 2}[p]
	for waited := now - at; lv > 0 && waited >= aging; waited -= aging {
		lv--
	}
	return lv
}

// FuzzController drives a deterministic single-threaded sequence of
// acquisitions (of random client keys, weights and priorities),
// releases, double releases, cancellations, clock advances (timeouts and
// aging), cap and aging changes and TryAcquires through the controller's own
// primitives, and checks its invariants after every step.
func FuzzController(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 1, 0, 4, 50})
	f.Add([]byte{5, 1, 1, 1, 0, 1, 0, 1, 0, 3, 3, 0, 1, 0, 1, 1})
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 200, 2, 0, 6, 2, 3, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		clk := &fakeClock{t: time.Unix(1000, 0)}
		c := New(Options{Now: clk.now, PriorityAging: 50 * time.Millisecond})
		c.SetCaps(map[string]int{"global": 3, "connection:a": 2, "model:a:x": 1, "connection:b": 1})
		var permits, released []*Permit
		var waiters []fuzzWaiter
		next := func(i *int) byte {
			if *i >= len(ops) {
				return 0
			}
			b := ops[*i]
			*i++
			return b
		}
		for i := 0; i < len(ops); {
			op, arg := next(&i)%7, next(&i)
			c.mu.Lock()
			before := make(map[string]int)
			for key, g := range c.gates {
				before[key] = c.ledger.InFlight(g.id)
			}
			parkedOn := make(map[*waiter]*gate, len(waiters))
			for _, fw := range waiters {
				parkedOn[fw.w] = fw.w.cls.on
			}
			var what string
			switch op {
			case 0: // acquire
				path := fuzzPaths[int(arg)%len(fuzzPaths)]
				cw := next(&i) // client key, weight (0 means 1) and priority
				req := Request{Gates: refs(path...), MaxWait: time.Duration(arg%4) * 10 * time.Millisecond, MaxQueueDepth: int(arg/4) % 3,
					Client: fuzzClients[int(cw)%len(fuzzClients)], Weight: int(cw/4) % 5, Priority: Priority(int(cw/20)%3 - 1)}
				what = fmt.Sprintf("acquire %v", req)
				p := &Permit{}
				w, err := c.submit(context.Background(), &req, p)
				switch {
				case err != nil:
					if !errors.Is(err, ErrQueueFull) {
						t.Fatalf("%s: %v", what, err)
					}
				case w != nil:
					fw := fuzzWaiter{w: w, p: p, client: req.Client, priority: req.Priority}
					if req.MaxWait > 0 {
						fw.deadline = w.start.Add(req.MaxWait)
					}
					waiters = append(waiters, fw)
				default:
					permits = append(permits, p)
				}
			case 1: // release
				if len(permits) > 0 {
					k := int(arg) % len(permits)
					what = "release"
					p := permits[k]
					permits = append(permits[:k], permits[k+1:]...)
					released = append(released, p)
					c.mu.Unlock()
					p.Release()
					c.mu.Lock()
				}
			case 2: // double release: must change nothing
				if len(released) > 0 {
					what = "double release"
					p := released[int(arg)%len(released)]
					c.mu.Unlock()
					p.Release()
					c.mu.Lock()
					for key, g := range c.gates {
						if n := c.ledger.InFlight(g.id); n != before[key] {
							t.Fatalf("double release moved %s from %d to %d", key, before[key], n)
						}
					}
				}
			case 3: // cancel
				if len(waiters) > 0 {
					what = "cancel"
					k := int(arg) % len(waiters)
					fw := waiters[k]
					waiters = append(waiters[:k], waiters[k+1:]...)
					if err := c.abandon(fw.w, context.Canceled); !errors.Is(err, context.Canceled) {
						t.Fatalf("cancel: %v", err)
					}
					c.recycle(fw.w)
				}
			case 4: // advance the clock; waiters past their deadline time out
				what = "advance"
				clk.advance(time.Duration(arg) * time.Millisecond)
				kept := waiters[:0]
				for _, fw := range waiters {
					if fw.deadline.IsZero() || clk.now().Before(fw.deadline) {
						kept = append(kept, fw)
						continue
					}
					on := fw.w.cls.on
					err := c.abandon(fw.w, nil)
					var ae *Error
					if !errors.As(err, &ae) || ae.Code != CodeTimeout || ae.Gate.Key != on.key || ae.Waited < fw.deadline.Sub(fw.w.start) {
						t.Fatalf("timeout: %v (parked on %s)", err, on.key)
					}
					c.recycle(fw.w)
				}
				waiters = kept
			case 5: // new caps, and a new aging period (25–100 ms)
				c.mu.Unlock()
				c.SetPriorityAging(time.Duration(arg%4+1) * 25 * time.Millisecond)
				c.mu.Lock()
				if err := checkInvariants(c); err != nil {
					t.Fatalf("after new aging: %v", err)
				}
				caps := make(map[string]int)
				for _, g := range fuzzGates {
					if cp := int(next(&i)) % 4; cp > 0 {
						caps[g] = cp
					}
				}
				what = fmt.Sprintf("caps %v", caps)
				c.mu.Unlock()
				c.SetCaps(caps)
				c.mu.Lock()
			case 6: // try acquire
				path := fuzzPaths[int(arg)%len(fuzzPaths)]
				what = fmt.Sprintf("try %v", path)
				c.mu.Unlock()
				p, ok := c.TryAcquire(Request{Gates: refs(path...)})
				c.mu.Lock()
				if ok {
					permits = append(permits, p)
				}
			}
			// Collect waiters admitted by this step.
			kept := waiters[:0]
			type admittedFrom struct {
				client string
				seq    uint64
				on     *gate
				level  int
			}
			now := c.clock()
			var admitted []admittedFrom
			for _, fw := range waiters {
				if fw.w.state != stateAdmitted {
					kept = append(kept, fw)
					continue
				}
				admitted = append(admitted, admittedFrom{fw.client, fw.w.seq, parkedOn[fw.w], effectiveLevel(fw.priority, fw.w.at, now, c.aging)})
				c.collect(fw.w, fw.p)
				c.recycle(fw.w)
				permits = append(permits, fw.p)
			}
			waiters = kept
			// Strict classes, then FIFO within a key at a gate: a waiter
			// admitted from a gate leaves no waiter of a higher class (aging
			// counted), nor an earlier waiter of its key and class, parked
			// there all along.
			for _, a := range admitted {
				for _, fw := range waiters {
					on := fw.w.cls.on
					if on != a.on || parkedOn[fw.w] != on {
						continue
					}
					lv := effectiveLevel(fw.priority, fw.w.at, now, c.aging)
					if lv < a.level {
						t.Fatalf("after %s: waiter %d of level %d admitted from %s before %d of level %d, still parked there", what, a.seq, a.level, on.key, fw.w.seq, lv)
					}
					if fw.client == a.client && lv == a.level && fw.w.seq < a.seq {
						t.Fatalf("after %s: key %q waiter %d admitted from %s before %d, still parked there", what, a.client, a.seq, on.key, fw.w.seq)
					}
				}
			}
			if err := checkInvariants(c); err != nil {
				t.Fatalf("after %s: %v", what, err)
			}
			// A gate whose in-flight grew in this step admitted someone, and
			// nobody is admitted beyond the cap in force.
			for key, g := range c.gates {
				if n := c.ledger.InFlight(g.id); g.cap > 0 && n > before[key] && n > g.cap {
					t.Fatalf("after %s: %s holds %d over cap %d", what, key, n, g.cap)
				}
			}
			// The permits held account for every slot.
			held := make(map[*gate]int)
			for _, p := range permits {
				for _, g := range p.gates[:p.n] {
					held[g]++
				}
			}
			for key, g := range c.gates {
				if held[g] != g.held {
					t.Fatalf("after %s: %s held %d, permits hold %d", what, key, g.held, held[g])
				}
			}
			if len(waiters) != c.waiters {
				t.Fatalf("after %s: %d waiters outstanding, controller has %d", what, len(waiters), c.waiters)
			}
			c.mu.Unlock()
		}
		// Drain: cancel every waiter, release every permit; nothing remains.
		c.mu.Lock()
		for _, fw := range waiters {
			if err := c.abandon(fw.w, context.Canceled); err == nil {
				c.collect(fw.w, fw.p)
				permits = append(permits, fw.p)
			}
			c.recycle(fw.w)
		}
		c.mu.Unlock()
		for _, p := range permits {
			p.Release()
		}
		for _, s := range c.Stats() {
			if s.InFlight != 0 || s.Queued != 0 || s.Waiting != 0 {
				t.Fatalf("at the end %s: in flight %d queued %d waiting %d", s.Key, s.InFlight, s.Queued, s.Waiting)
			}
		}
	})
}
