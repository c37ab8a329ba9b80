package cluster

import (
	"maps"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

func TestLedgerCapsLeaveOutGatesThatCannotBind(t *testing.T) {
	for _, tc := range []struct {
		name       string
		caps, want map[string]int
	}{
		{"model at its connection's cap",
			map[string]int{"connection:a": 4, "model:a:glm-5": 4},
			map[string]int{"connection:a": 4}},
		{"model above its connection's cap",
			map[string]int{"connection:a": 4, "model:a:glm-5": 10},
			map[string]int{"connection:a": 4}},
		{"model below its connection's cap binds",
			map[string]int{"connection:a": 4, "model:a:glm-5": 1},
			map[string]int{"connection:a": 4, "model:a:glm-5": 1}},
		{"model of an uncapped connection binds",
			map[string]int{"model:a:glm-5": 1},
			map[string]int{"model:a:glm-5": 1}},
		{"another connection's cap is not enclosing",
			map[string]int{"connection:b": 1, "model:a:glm-5": 3},
			map[string]int{"connection:b": 1, "model:a:glm-5": 3}},
		{"a model name with colons",
			map[string]int{"connection:a": 2, "model:a:org:m:v1": 2},
			map[string]int{"connection:a": 2}},
		{"connection and provider at the global cap",
			map[string]int{"global": 5, "connection:a": 5, "provider:p": 6, "model:a:m": 9},
			map[string]int{"global": 5}},
		{"a client key's gate is on no such path",
			map[string]int{"global": 5, "key:k1": 9},
			map[string]int{"global": 5, "key:k1": 9}},
		{"shadow gates are not model gates",
			map[string]int{"connection:a": 2, "shadow:model:a:m": 2},
			map[string]int{"connection:a": 2, "shadow:model:a:m": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := maps.Clone(tc.caps)
			got := ledgerCaps(in)
			if !maps.Equal(got, tc.want) {
				t.Errorf("ledgerCaps(%v) = %v, want %v", tc.caps, got, tc.want)
			}
			if !maps.Equal(in, tc.caps) {
				t.Errorf("ledgerCaps changed its argument: %v, was %v", in, tc.caps)
			}
		})
	}
}

// TestEnclosedGateTakesNoLease: a model's gate capped at or above its
// connection's holds no lease in Redis (one gate fewer to write per
// request), yet the cap holds across replicas through the connection's
// gate, Stats still reports the model's cap, and once its cap is lowered
// below the connection's the permits running through it are entered and
// count against it on every replica.
func TestEnclosedGateTakesNoLease(t *testing.T) {
	const conn, model = "connection:enc", "model:enc:glm-5"
	reps := replicas(t, 2, nil, Options{Recheck: time.Minute})
	a, b := reps[0], reps[1]
	setCaps := func(caps map[string]int) {
		a.SetCaps(caps)
		b.SetCaps(caps)
	}
	setCaps(map[string]int{conn: 2, model: 2})
	req := admission.Request{Gates: path("global", conn, model), MaxWait: 10 * time.Second}

	p1, ok := a.TryAcquire(req)
	if !ok {
		t.Fatal("first request not admitted")
	}
	p2, ok := b.TryAcquire(req)
	if !ok {
		t.Fatal("second request not admitted")
	}
	if n := zcard(t, a.rdb, a.keys.holders(model)); n != 0 {
		t.Errorf("holders of the enclosed model gate = %d, want 0 (no lease)", n)
	}
	if n := zcard(t, a.rdb, a.keys.holders(conn)); n != 2 {
		t.Errorf("holders of the connection gate = %d, want 2", n)
	}
	for name, c := range map[string]*Controller{"a": a, "b": b} {
		if _, ok := c.TryAcquire(req); ok {
			t.Fatalf("replica %s admitted a third request over the cap of 2", name)
		}
	}
	var st *admission.GateStats
	for _, s := range a.Stats() {
		if s.Key == model {
			st = &s
		}
	}
	if st == nil || st.Cap != 2 {
		t.Errorf("Stats of the model gate = %+v, want its cap 2 reported", st)
	}

	// The model's cap drops below the connection's: it binds now, and both
	// running permits count against it.
	setCaps(map[string]int{conn: 2, model: 1})
	if n := zcard(t, a.rdb, a.keys.holders(model)); n != 2 {
		t.Fatalf("holders of the model gate once it binds = %d, want 2 (the running permits entered)", n)
	}
	p1.Release()
	for name, c := range map[string]*Controller{"a": a, "b": b} {
		if _, ok := c.TryAcquire(req); ok {
			t.Fatalf("replica %s admitted past the model's cap of 1 while a permit still runs", name)
		}
	}
	p2.Release()
	p3, ok := b.TryAcquire(req)
	if !ok {
		t.Fatal("not admitted once both permits were released")
	}
	if n := zcard(t, a.rdb, a.keys.holders(model)); n != 1 {
		t.Errorf("holders of the binding model gate = %d, want 1", n)
	}

	// Enclosed again: the lease p3 took there goes with its release.
	setCaps(map[string]int{conn: 2, model: 3})
	p3.Release()
	for _, g := range []string{conn, model} {
		if n := zcard(t, a.rdb, a.keys.holders(g)); n != 0 {
			t.Errorf("holders of %s after every release = %d, want 0", g, n)
		}
	}
}

// TestEnclosedGateCommands: the uncontended admit and release of a path
// whose model gate is enclosed by its connection's write one gate's lease,
// not two.
func TestEnclosedGateCommands(t *testing.T) {
	rdb := newClient(t, shared.sock)
	hook := &countingHook{n: make(map[string]int)}
	rdb.AddHook(hook)
	c := newController(t, rdb, Options{Prefix: uniquePrefix(t), LeaseTTL: time.Hour, Recheck: time.Hour})
	c.SetCaps(map[string]int{"connection:cmd": 10000, "model:cmd:perf-model": 10000})
	req := admission.Request{Gates: path("global", "connection:cmd", "model:cmd:perf-model"), MaxWait: 30 * time.Second}
	p, err := c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	hook.take()

	p, err = c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	acquired := hook.take()
	p.Release()
	released := hook.take()
	if want := map[string]int{"multi": 1, "hmget": 1, "zadd": 1, "zcard": 1, "exec": 1}; !maps.Equal(acquired, want) {
		t.Errorf("acquire sent %v, want %v", acquired, want)
	}
	if want := map[string]int{"multi": 1, "zrem": 1, "hmget": 1, "exec": 1}; !maps.Equal(released, want) {
		t.Errorf("release sent %v, want %v", released, want)
	}
}
