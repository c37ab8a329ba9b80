package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// stressPaths are the paths of a small gateway: two providers, three
// connections, five models; some requests skip the global gate.
var stressPaths = [][]string{
	{"global", "provider:a", "connection:a1", "model:a1:x"},
	{"global", "provider:a", "connection:a1", "model:a1:y"},
	{"provider:a", "connection:a1", "model:a1:y"},
	{"global", "provider:a", "connection:a2", "model:a2:x"},
	{"global", "provider:b", "connection:b1", "model:b1:x"},
	{"provider:b", "connection:b1", "model:b1:y"},
}

var stressGates = []string{
	"global", "provider:a", "provider:b", "connection:a1", "connection:a2", "connection:b1",
	"model:a1:x", "model:a1:y", "model:a2:x", "model:b1:x", "model:b1:y",
}

// capChecker checks, with counters of its own, that no gate ever holds more
// than the caps allow. Caps change while requests run, and a lowered cap
// never cuts a running request, so the bound for a request is the largest
// cap in force at any time since it started to acquire: the latest-admitted
// holder of a gate was admitted when in-flight was below the cap of that
// moment, and every other holder already held. The cap changer publishes an
// epoch before applying it, so the cap in force when epoch e is visible is
// that of e or e-1.
type capChecker struct {
	mu      sync.RWMutex
	history []map[string]int
	counts  map[string]*atomic.Int64
	epoch   atomic.Int64
}

func newCapChecker(initial map[string]int) *capChecker {
	k := &capChecker{history: []map[string]int{initial}, counts: make(map[string]*atomic.Int64)}
	for _, g := range stressGates {
		k.counts[g] = new(atomic.Int64)
	}
	return k
}

func (k *capChecker) publish(caps map[string]int) {
	k.mu.Lock()
	k.history = append(k.history, caps)
	k.epoch.Store(int64(len(k.history) - 1))
	k.mu.Unlock()
}

// bound is the largest cap of key since epoch from-1; 0 = uncapped at some point.
func (k *capChecker) bound(key string, from int64) int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	b := 0
	for _, caps := range k.history[max(from-1, 0):] {
		cp := caps[key]
		if cp == 0 {
			return 0
		}
		b = max(b, cp)
	}
	return b
}

func randomCaps(r *rand.Rand) map[string]int {
	caps := make(map[string]int)
	for _, g := range stressGates {
		if r.IntN(5) > 0 {
			caps[g] = 1 + r.IntN(4)
		}
	}
	return caps
}

func TestStress(t *testing.T) {
	const (
		goroutines = 1500
		opsEach    = 4
		maxChanges = 300
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	initial := randomCaps(rng)
	c := New(Options{PriorityAging: 5 * time.Millisecond}) // waits of up to 50 ms age
	c.SetCaps(initial)
	check := newCapChecker(initial)

	var violations atomic.Int64
	var firstViolation atomic.Value
	var admitted, timeouts, queueFull, cancels atomic.Int64
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(i)+2))
			for range opsEach {
				keys := stressPaths[r.IntN(len(stressPaths))]
				req := Request{Gates: refs(keys...), MaxQueueDepth: []int{0, 0, 50, 300}[r.IntN(4)],
					Client: []string{"", "k1", "k2", "k3"}[r.IntN(4)], Weight: r.IntN(6), Priority: Priority(r.IntN(3) - 1)}
				if r.IntN(3) > 0 {
					req.MaxWait = time.Duration(1+r.IntN(50)) * time.Millisecond
				}
				ctx, cancel := context.WithCancel(t.Context())
				switch r.IntN(4) {
				case 0:
					ctx, cancel = context.WithTimeout(t.Context(), time.Duration(1+r.IntN(10))*time.Millisecond)
				case 1:
					spins := r.IntN(50)
					go func() {
						for range spins {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				from := check.epoch.Load()
				var p *Permit
				var err error
				if r.IntN(5) == 0 {
					var ok bool
					if p, ok = c.TryAcquire(req); !ok {
						cancel()
						continue
					}
				} else {
					p, err = c.Acquire(ctx, req)
				}
				cancel()
				var ae *Error
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.As(err, &ae) && ae.Code == CodeTimeout && errors.Is(err, ErrTimeout):
					timeouts.Add(1)
					continue
				case errors.As(err, &ae) && ae.Code == CodeQueueFull && errors.Is(err, ErrQueueFull):
					queueFull.Add(1)
					continue
				case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
					cancels.Add(1)
					continue
				default:
					t.Errorf("Acquire: unexpected error %v", err)
					continue
				}
				for _, key := range keys {
					v := check.counts[key].Add(1)
					if b := check.bound(key, from); b > 0 && v > int64(b) {
						if violations.Add(1) == 1 {
							firstViolation.Store(key)
						}
					}
				}
				for range r.IntN(20) {
					runtime.Gosched()
				}
				for _, key := range keys {
					check.counts[key].Add(-1)
				}
				p.Release()
				if r.IntN(10) == 0 {
					p.Release() // double release must be harmless
				}
			}
		})
	}

	done := make(chan struct{})
	changerDone := make(chan struct{})
	go func() {
		defer close(changerDone)
		r := rand.New(rand.NewPCG(seed, 0))
		for range maxChanges {
			select {
			case <-done:
				return
			default:
			}
			caps := randomCaps(r)
			check.publish(caps)
			c.SetCaps(caps)
			if r.IntN(10) == 0 {
				c.SetPriorityAging(time.Duration(1+r.IntN(10)) * time.Millisecond)
			}
			c.mu.Lock()
			err := checkInvariants(c)
			c.mu.Unlock()
			if err != nil {
				t.Errorf("invariant after SetCaps: %v", err)
				return
			}
			for range 200 {
				runtime.Gosched()
			}
		}
	}()
	wg.Wait()
	close(done)
	<-changerDone

	if n := violations.Load(); n > 0 {
		t.Errorf("%d cap violations, first on %v", n, firstViolation.Load())
	}
	t.Logf("admitted %d, timeouts %d, queue full %d, cancels %d, cap changes %d",
		admitted.Load(), timeouts.Load(), queueFull.Load(), cancels.Load(), check.epoch.Load())
	if admitted.Load() == 0 || timeouts.Load()+cancels.Load() == 0 {
		t.Errorf("stress exercised too little: admitted %d, timeouts %d, cancels %d", admitted.Load(), timeouts.Load(), cancels.Load())
	}
	c.mu.Lock()
	err := checkInvariants(c)
	waiters := c.waiters
	c.mu.Unlock()
	if err != nil {
		t.Errorf("final invariant: %v", err)
	}
	if waiters != 0 {
		t.Errorf("%d waiters remain", waiters)
	}
	for _, s := range c.Stats() {
		if s.InFlight != 0 || s.Queued != 0 || s.Waiting != 0 {
			t.Errorf("gate %s: in flight %d queued %d waiting %d at the end", s.Key, s.InFlight, s.Queued, s.Waiting)
		}
	}
	want := Totals{Admitted: admitted.Load(), Timeouts: timeouts.Load(), QueueFull: queueFull.Load(), Cancels: cancels.Load()}
	if diff := cmp.Diff(want, c.Totals()); diff != "" {
		t.Errorf("controller totals mismatch (-requests saw +controller counted):\n%s", diff)
	}
	for key, n := range check.counts {
		if n.Load() != 0 {
			t.Errorf("checker count of %s is %d at the end", key, n.Load())
		}
	}
}
