package cluster

import (
	"testing"
	"time"
)

// TestAffinitySharesBindings: a binding one replica writes is read by
// another, replaced when the session moves, and gone after its TTL.
func TestAffinitySharesBindings(t *testing.T) {
	t.Parallel()
	prefix := uniquePrefix(t)
	a, err := NewAffinity(LimitsOptions{Client: newClient(t, shared.sock), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewAffinity(LimitsOptions{Client: newClient(t, shared.sock), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, ok, err := b.GetBinding(ctx, 42); ok || err != nil {
		t.Fatalf("unbound key: ok %v err %v", ok, err)
	}
	if err := a.SetBinding(ctx, 42, "conn-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, ok, err := b.GetBinding(ctx, 42); !ok || err != nil || c != "conn-1" {
		t.Fatalf("other replica reads %q %v %v, want conn-1", c, ok, err)
	}
	if err := b.SetBinding(ctx, 42, "conn-2", time.Minute); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := a.GetBinding(ctx, 42); c != "conn-2" {
		t.Errorf("after the move: %q, want conn-2", c)
	}
	if err := a.SetBinding(ctx, 43, "conn-1", 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rdb := newClient(t, shared.sock)
	waitFor(t, 5*time.Second, "the binding to expire", func() bool {
		return rdb.Exists(ctx, prefix+":aff:2b").Val() == 0
	})
	if _, ok, _ := b.GetBinding(ctx, 43); ok {
		t.Error("an expired binding is still read")
	}
	if _, err := NewAffinity(LimitsOptions{Client: rdb, Prefix: "a{b}"}); err == nil {
		t.Error("a prefix with a brace was accepted")
	}
}
