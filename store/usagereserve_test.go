//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestReserveTokens: a reservation is added only while the day's tokens stay
// within the limit, a fresh day included; a settled difference (negative when the
// estimate was high) is added with AddUsageTotals and frees room; an unknown id is
// ErrNotFound. Both the connections' and the client keys' tables.
func TestReserveTokens(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("tpd-reserve"))
	k, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("tpd-reserve"))
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		id      string
		reserve func(tokens, limit int64) (int64, bool, error)
		settle  func(tokens int64) (int64, error)
	}{
		{"connection", c.ID,
			func(n, l int64) (int64, bool, error) { return s.ReserveTokens(ctx, c.ID, day, n, l) },
			func(n int64) (int64, error) { u, err := s.AddUsageTotals(ctx, c.ID, day, 0, n); return u.Tokens, err }},
		{"client key", k.ID,
			func(n, l int64) (int64, bool, error) { return s.ReserveClientKeyTokens(ctx, k.ID, day, n, l) },
			func(n int64) (int64, error) {
				u, err := s.AddClientKeyUsage(ctx, k.ID, day, 0, n)
				return u.Tokens, err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if total, ok, err := tc.reserve(400, 300); err != nil || ok || total != 0 {
				t.Fatalf("fresh day, 400 of 300: %d %v %v; want 0 false", total, ok, err)
			}
			if total, ok, err := tc.reserve(200, 300); err != nil || !ok || total != 200 {
				t.Fatalf("200 of 300: %d %v %v; want 200 true", total, ok, err)
			}
			if total, ok, err := tc.reserve(200, 300); err != nil || ok || total != 200 {
				t.Fatalf("200 more of 300: %d %v %v; want 200 false", total, ok, err)
			}
			// The answer used 120 of the 200 reserved.
			if total, err := tc.settle(-80); err != nil || total != 120 {
				t.Fatalf("settle -80: %d %v; want 120", total, err)
			}
			if total, ok, err := tc.reserve(180, 300); err != nil || !ok || total != 300 {
				t.Fatalf("180 after settling: %d %v %v; want 300 true", total, ok, err)
			}
			if total, ok, err := tc.reserve(5, 0); err != nil || !ok || total != 305 {
				t.Fatalf("no limit: %d %v %v; want 305 true", total, ok, err)
			}
		})
	}
	if _, _, err := s.ReserveTokens(ctx, "00000000-0000-4000-8000-000000000000", day, 1, 300); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown connection: err = %v, want ErrNotFound", err)
	}
	if _, _, err := s.ReserveClientKeyTokens(ctx, "00000000-0000-4000-8000-000000000000", day, 1, 300); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown client key: err = %v, want ErrNotFound", err)
	}
}

// TestReserveTokensConcurrent: 25 callers reserving 40 tokens each against 300 at
// once: exactly 7 get theirs, and the day holds 280.
func TestReserveTokensConcurrent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	k, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("tpd-race"))
	if err != nil {
		t.Fatal(err)
	}
	day := time.Now()
	var (
		wg       sync.WaitGroup
		accepted atomic.Int64
	)
	for range 25 {
		wg.Go(func() {
			_, ok, err := s.ReserveClientKeyTokens(ctx, k.ID, day, 40, 300)
			if err != nil {
				t.Errorf("ReserveClientKeyTokens: %v", err)
			}
			if ok {
				accepted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := accepted.Load(); n != 7 {
		t.Errorf("accepted %d of 25 reservations of 40 against 300, want 7", n)
	}
	m, err := s.ClientKeyUsageForDay(ctx, day)
	if err != nil || m[k.ID].Tokens != 280 {
		t.Errorf("day's tokens %d (%v), want 280", m[k.ID].Tokens, err)
	}
}
