package cluster

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestReserveTokens: a tpm reservation is taken only when it fits the window (any
// size fits an empty one), a settlement below the estimate gives the difference
// back, and 25 replicas' worth of concurrent reservations of 40 against tpm 300
// take exactly 7 (with the first, which fits the empty window, counted).
func TestReserveTokens(t *testing.T) {
	rdb := newClient(t, shared.sock)
	l, err := NewLimits(LimitsOptions{Client: rdb, Prefix: uniquePrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if ok, used, left, err := l.ReserveTokens(ctx, "a", 300, 500); err != nil || !ok || used != 500 || left <= 0 || left > time.Minute {
		t.Fatalf("500 into an empty window of 300: %v %d %v %v; want reserved, 500", ok, used, left, err)
	}
	if ok, used, _, err := l.ReserveTokens(ctx, "a", 300, 1); err != nil || ok || used != 500 {
		t.Fatalf("1 more over the limit: %v %d %v; want refused at 500", ok, used, err)
	}
	// The answer used 100 of the 500: the window holds 100.
	if err := l.AddTokens(ctx, "a", 300, -400); err != nil {
		t.Fatal(err)
	}
	if ok, used, _, err := l.ReserveTokens(ctx, "a", 300, 200); err != nil || !ok || used != 300 {
		t.Fatalf("200 after settling: %v %d %v; want reserved, 300", ok, used, err)
	}
	// Never below zero.
	if err := l.AddTokens(ctx, "a", 300, -1000); err != nil {
		t.Fatal(err)
	}
	if v, err := l.View(ctx, "a", 300); err != nil || v.TPMUsed != 0 {
		t.Fatalf("after over-settling: used %d %v, want 0", v.TPMUsed, err)
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		lefts    []time.Duration
	)
	for range 25 {
		wg.Go(func() {
			ok, _, left, err := l.ReserveTokens(ctx, "b", 300, 40)
			if err != nil {
				t.Errorf("ReserveTokens: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			lefts = append(lefts, left)
			if ok {
				accepted++
			}
		})
	}
	wg.Wait()
	// Every call in one minute window reports nearly the same time left; a
	// minute that began during the calls pays 300 off and lets more in
	// (never fewer), and shows as a spread of most of a minute.
	if crossed := slices.Max(lefts)-slices.Min(lefts) > 30*time.Second; accepted != 7 && !(crossed && accepted > 7) {
		t.Errorf("accepted %d reservations of 40 against tpm 300, want 7", accepted)
	}
}
