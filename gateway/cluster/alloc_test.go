package cluster

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// TestTxArgsAllocateNothing: filling a transaction's arguments for a path of
// maxPath gates — the admit's HMGET, ZADD and ZCARD, the release's ZREM —
// allocates nothing: keys are boxed once per gate (gateState), the buffers
// come from a pool. (The go-redis commands made from them are go-redis's.)
func TestTxArgsAllocateNothing(t *testing.T) {
	var gates [maxPath]gateCap
	var keys [maxPath]any
	for i := range gates {
		k := "connection:g" + string(rune('a'+i))
		gates[i] = gateCap{hKey: "h:" + k, key: k, capArg: 8, cap: 8}
		keys[i] = gates[i].key
	}
	var queued, exp, member any = "queued", int64(1), "member"
	fill := func() {
		b := getTxBuf()
		hm := b.argv(2 + maxPath)
		hm[0], hm[1] = "hmget", queued
		copy(hm[2:], keys[:])
		for _, g := range gates {
			a := b.argv(6)
			a[0], a[1], a[2], a[3] = "zadd", g.hKey, exp, member
			a[4], a[5] = "zcard", g.hKey
		}
		b.put()
		b = getTxBuf()
		for _, g := range gates {
			a := b.argv(3)
			a[0], a[1], a[2] = "zrem", g.hKey, member
		}
		b.put()
	}
	fill()
	if n := testing.AllocsPerRun(100, fill); n != 0 {
		t.Errorf("filling the admit and release arguments allocated %.1f times, want 0", n)
	}
}

// TestUncontendedAllocations bounds what one uncontended acquire and release
// through three capped gates allocates, go-redis included (157 objects on
// four gates before the transactions were typed commands with pooled
// arguments, 75 after; 68 here on three gates when written). What remains is go-redis's: a command per
// ZADD/ZCARD/ZREM, the HMGET replies, MULTI/EXEC and the QUEUED replies, a
// pipeline's context and its connection's health check; and the lease.
func TestUncontendedAllocations(t *testing.T) {
	c := newController(t, newClient(t, shared.sock), Options{Prefix: uniquePrefix(t), LeaseTTL: time.Hour, Recheck: time.Hour})
	c.SetCaps(map[string]int{benchKeys[0]: 1000, benchKeys[2]: 100, benchKeys[3]: 50})
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second, Client: "k1"}
	ctx := t.Context()
	var failed error
	once := func() {
		p, err := c.Acquire(ctx, req)
		if err != nil {
			failed = err
			return
		}
		p.Release()
	}
	once() // warm: the scripts, the connections, the pools
	n := testing.AllocsPerRun(50, once)
	if failed != nil {
		t.Fatal(failed)
	}
	const most = 90
	if n > most {
		t.Errorf("one uncontended acquire and release allocated %.1f objects, want at most %d", n, most)
	}
	t.Logf("one uncontended acquire and release, three capped gates: %.1f allocations", n)
}

// TestFullPathTransactions: a path of maxPath capped gates goes through the
// admit and release transactions (the longest argument lists they build):
// one lease on every gate while held, none after.
func TestFullPathTransactions(t *testing.T) {
	rdb := newClient(t, shared.sock)
	c := newController(t, rdb, Options{Prefix: uniquePrefix(t), LeaseTTL: time.Hour, Recheck: time.Hour})
	keys := make([]string, maxPath)
	caps := make(map[string]int)
	for i := range keys {
		keys[i] = "model:full:" + string(rune('a'+i))
		caps[keys[i]] = 4
	}
	c.SetCaps(caps)
	req := admission.Request{Gates: path(keys...), MaxWait: 30 * time.Second, Client: "k1"}
	for range 2 { // the first may run before the clock offset is known (admit.lua)
		p, err := c.Acquire(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if n := zcard(t, rdb, c.keys.holders(k)); n != 1 {
				t.Errorf("%s holders = %d while held, want 1", k, n)
			}
		}
		p.Release()
		for _, k := range keys {
			if n := zcard(t, rdb, c.keys.holders(k)); n != 0 {
				t.Errorf("%s holders = %d after release, want 0", k, n)
			}
		}
	}
}
