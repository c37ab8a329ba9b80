//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/google/go-cmp/cmp"
)

func TestTryCountRequest(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("rpd"))
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	for i := int64(1); i <= 3; i++ {
		count, ok, err := s.TryCountRequest(ctx, c.ID, day, 3)
		if err != nil || !ok || count != i {
			t.Fatalf("request %d: TryCountRequest = %d, %v, %v; want %d, true", i, count, ok, err, i)
		}
	}
	for range 2 {
		count, ok, err := s.TryCountRequest(ctx, c.ID, day, 3)
		if err != nil || ok || count != 3 {
			t.Fatalf("over the limit: TryCountRequest = %d, %v, %v; want 3, false", count, ok, err)
		}
	}
	// Another UTC day has its own count.
	if count, ok, err := s.TryCountRequest(ctx, c.ID, day.AddDate(0, 0, 1), 3); err != nil || !ok || count != 1 {
		t.Errorf("next day: TryCountRequest = %d, %v, %v; want 1, true", count, ok, err)
	}
	// No limit.
	if count, ok, err := s.TryCountRequest(ctx, c.ID, day, 0); err != nil || !ok || count != 4 {
		t.Errorf("limit 0: TryCountRequest = %d, %v, %v; want 4, true", count, ok, err)
	}
	if _, _, err := s.TryCountRequest(ctx, "00000000-0000-4000-8000-000000000000", day, 3); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown connection: err = %v, want ErrNotFound", err)
	}
}

func TestTryCountRequestConcurrent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("rpd-race"))
	day := time.Now()
	const limit, callers = 10, 25
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
	)
	for range callers {
		wg.Go(func() {
			_, ok, err := s.TryCountRequest(ctx, c.ID, day, limit)
			if err != nil {
				t.Errorf("TryCountRequest: %v", err)
				return
			}
			if ok {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if accepted != limit {
		t.Errorf("accepted %d of %d concurrent requests, want exactly %d", accepted, callers, limit)
	}
}

func TestAddUsage(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	a := mustCreateConnection(t, s, connInput("usage-a"))
	b := mustCreateConnection(t, s, connInput("usage-b"))
	day := time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC)
	// 01:30 on 2 March in UTC+2 is still 1 March in UTC.
	sameDayElsewhere := time.Date(2026, 3, 2, 1, 30, 0, 0, time.FixedZone("UTC+2", 2*3600))

	for _, add := range []struct {
		id     string
		day    time.Time
		req    int64
		tokens int64
	}{
		{a.ID, day, 1, 100},
		{a.ID, sameDayElsewhere, 2, 50},
		{b.ID, day, 1, 7},
		{b.ID, day.AddDate(0, 0, 1), 5, 500},
	} {
		if err := s.AddUsage(ctx, add.id, add.day, add.req, add.tokens); err != nil {
			t.Fatalf("AddUsage: %v", err)
		}
	}
	got, err := s.UsageForDay(ctx, day)
	if err != nil {
		t.Fatalf("UsageForDay: %v", err)
	}
	want := map[string]store.Usage{a.ID: {Requests: 3, Tokens: 150}, b.ID: {Requests: 1, Tokens: 7}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UsageForDay mismatch (-want +got):\n%s", diff)
	}
	if err := s.AddUsage(ctx, "00000000-0000-4000-8000-000000000000", day, 1, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AddUsage(unknown connection): err = %v, want ErrNotFound", err)
	}
}

func TestAddUsageTotals(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("usage-totals"))
	day := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, _, err := s.TryCountRequest(ctx, c.ID, day, 0); err != nil {
		t.Fatalf("TryCountRequest: %v", err)
	}
	tests := []struct {
		name             string
		requests, tokens int64
		want             store.Usage
	}{
		{name: "tokens only", tokens: 60, want: store.Usage{Requests: 1, Tokens: 60}},
		{name: "both", requests: 2, tokens: 40, want: store.Usage{Requests: 3, Tokens: 100}},
	}
	for _, tc := range tests {
		got, err := s.AddUsageTotals(ctx, c.ID, day, tc.requests, tc.tokens)
		if err != nil {
			t.Fatalf("%s: AddUsageTotals: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: totals mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, err := s.AddUsageTotals(ctx, "00000000-0000-4000-8000-000000000000", day, 0, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown connection: err = %v, want ErrNotFound", err)
	}
}
