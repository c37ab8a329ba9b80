package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// rpdStore is a UsageCounter of requests and tokens per id and UTC day that
// fails while fail is set.
type rpdStore struct {
	mu       sync.Mutex
	requests map[string]int64
	tokens   map[string]int64
	fail     bool
}

func (s *rpdStore) key(id string, day time.Time) string {
	return id + " " + utcDay(day).Format(time.DateOnly)
}

func (s *rpdStore) CountRequest(_ context.Context, id string, day time.Time, limit int64) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return 0, false, fmt.Errorf("store away: %w", ErrStoreUnavailable)
	}
	k := s.key(id, day)
	if s.requests[k] >= limit {
		return s.requests[k], false, nil
	}
	s.requests[k]++
	return s.requests[k], true, nil
}

func (s *rpdStore) AddUsage(_ context.Context, id string, day time.Time, requests, tokens int64) (DayUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return DayUsage{}, fmt.Errorf("store away: %w", ErrStoreUnavailable)
	}
	k := s.key(id, day)
	s.requests[k] += requests
	s.tokens[k] += tokens
	return DayUsage{Requests: s.requests[k], Tokens: s.tokens[k]}, nil
}

func (s *rpdStore) ReserveTokens(_ context.Context, id string, day time.Time, tokens, limit int64) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return 0, false, fmt.Errorf("store away: %w", ErrStoreUnavailable)
	}
	k := s.key(id, day)
	if s.tokens[k]+tokens > limit {
		return s.tokens[k], false, nil
	}
	s.tokens[k] += tokens
	return s.tokens[k], true, nil
}

func (s *rpdStore) setFail(fail bool) {
	s.mu.Lock()
	s.fail = fail
	s.mu.Unlock()
}

func (s *rpdStore) day(id string, day time.Time) (requests, tokens int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[s.key(id, day)], s.tokens[s.key(id, day)]
}

func (s *rpdStore) DayUsage(context.Context, time.Time) (map[string]DayUsage, error) {
	return nil, errors.New("not used")
}

// TestRequestsCountedWhileStoreAwayWrittenWhenBack: a request counted in memory
// while the usage store is away is written to it with the next request once it
// is back: the store then holds both, and so does the rpd budget.
func TestRequestsCountedWhileStoreAwayWrittenWhenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &rpdStore{requests: map[string]int64{}, tokens: map[string]int64{}, fail: true}
	var r State
	l := &Limits{RPD: 10, GateRPD: "rpd:c"}
	now := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	if v, err := d.CountRequest(ctx, u, "c", &r, l, now); err != nil || v != DispatchOK {
		t.Fatalf("request while away: %v, %v", v, err)
	}
	u.mu.Lock()
	u.fail = false
	u.mu.Unlock()
	d.Retry()
	if v, err := d.CountRequest(ctx, u, "c", &r, l, now); err != nil || v != DispatchOK {
		t.Fatalf("request once back: %v, %v", v, err)
	}
	if got := u.requests[u.key("c", now)]; got != 2 {
		t.Errorf("store's day requests %d, want 2 (1 from memory, 1 counted)", got)
	}
	if got := r.Budgets(l, now)[live.BudgetRPD].Remaining; got != 8 {
		t.Errorf("rpd remaining %d, want 8", got)
	}
}

// TestSettleFailingStoreSwitchesToMemory: a settlement the usage store fails to
// take switches the daily counts to memory for a while (the store is left
// alone), and keeps the difference pending for it.
func TestSettleFailingStoreSwitchesToMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &flakyDays{dayStore: dayStore{tokens: map[string]int64{}}}
	var r State
	l := &Limits{TPD: 1000, GateTPD: "tpd:c"}
	b := Budget{ID: "c", DayID: "c", L: l, R: &r, U: u}
	now := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	var rs Reservation
	if _, v := rs.Reserve(ctx, Local{}, d, b, 300, now); v != DispatchOK {
		t.Fatalf("reserve: %v", v)
	}
	u.fail = true
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 100}, now)
	if d.down.up() {
		t.Error("the usage store is still asked right after it failed a settlement")
	}
	r.mu.Lock()
	pend := r.pendTok
	r.mu.Unlock()
	if pend != -200 {
		t.Errorf("pending tokens %d, want -200 (the settlement's difference, for the store)", pend)
	}
	if got := r.Budgets(l, now)[live.BudgetTPD].Remaining; got != 900 {
		t.Errorf("tpd remaining %d, want 900", got)
	}
}

// TestPendingCountsWrittenByEitherBudget: what one daily budget counted in
// memory while the usage store was away is written by the next call of the
// other once the store is back: pending requests by a tpd reservation, pending
// tokens by an rpd count.
func TestPendingCountsWrittenByEitherBudget(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Date(2026, 3, 9, 12, 0, 0, 0, time.UTC)
	l := &Limits{RPD: 10, TPD: 1000, GateRPD: "rpd:c", GateTPD: "tpd:c"}

	t.Run("requests by tpd", func(t *testing.T) {
		d := NewDays(slog.New(slog.DiscardHandler))
		u := &rpdStore{requests: map[string]int64{}, tokens: map[string]int64{}, fail: true}
		var r State
		if v, err := d.CountRequest(ctx, u, "c", &r, l, now); err != nil || v != DispatchOK {
			t.Fatalf("request while away: %v, %v", v, err)
		}
		u.setFail(false)
		d.Retry()
		var rs Reservation
		if _, v := rs.Reserve(ctx, Local{}, d, Budget{ID: "c", DayID: "c", L: l, R: &r, U: u}, 100, now); v != DispatchOK {
			t.Fatalf("reserve once back: %v", v)
		}
		if req, tok := u.day("c", now); req != 1 || tok != 100 {
			t.Errorf("store's day: %d requests, %d tokens; want 1 and 100", req, tok)
		}
	})
	t.Run("tokens by rpd", func(t *testing.T) {
		d := NewDays(slog.New(slog.DiscardHandler))
		u := &rpdStore{requests: map[string]int64{}, tokens: map[string]int64{}, fail: true}
		var r State
		var rs Reservation
		if _, v := rs.Reserve(ctx, Local{}, d, Budget{ID: "c", DayID: "c", L: l, R: &r, U: u}, 100, now); v != DispatchOK {
			t.Fatalf("reserve while away: %v", v)
		}
		u.setFail(false)
		d.Retry()
		if v, err := d.CountRequest(ctx, u, "c", &r, l, now); err != nil || v != DispatchOK {
			t.Fatalf("request once back: %v, %v", v, err)
		}
		if req, tok := u.day("c", now); req != 1 || tok != 100 {
			t.Errorf("store's day: %d requests, %d tokens; want 1 and 100", req, tok)
		}
	})
}

// TestYesterdaysCountWaitsForTheStore: a request counted in memory while the
// usage store is away, just before UTC midnight, is still owed to yesterday's
// row after midnight: the state reports it pending (so the flusher keeps
// calling), keeps it through a flush the store fails again, and writes it to
// yesterday's row once the store is back; then nothing is pending.
func TestYesterdaysCountWaitsForTheStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &rpdStore{requests: map[string]int64{}, tokens: map[string]int64{}, fail: true}
	var r State
	l := &Limits{RPD: 10, GateRPD: "rpd:c"}
	if r.Pending() {
		t.Fatal("a new state reports counts pending")
	}
	yesterday := time.Date(2026, 3, 9, 23, 59, 0, 0, time.UTC)
	today := yesterday.Add(2 * time.Minute)
	if v, err := d.CountRequest(ctx, u, "c", &r, l, yesterday); err != nil || v != DispatchOK {
		t.Fatalf("request while away: %v, %v", v, err)
	}
	r.Blocked(l, today) // the new day starts
	if !r.Pending() {
		t.Fatal("after midnight, yesterday's request counted while away is not pending")
	}
	d.Retry()
	d.Flush(ctx, u, "c", &r, l, today, 0, 0) // the store fails again
	if !r.Pending() {
		t.Fatal("yesterday's request was dropped by a flush the store failed")
	}
	u.setFail(false)
	d.Retry()
	d.Flush(ctx, u, "c", &r, l, today, 0, 0)
	if req, _ := u.day("c", yesterday); req != 1 {
		t.Errorf("store's requests for yesterday %d, want 1", req)
	}
	if r.Pending() {
		t.Error("counts still pending after the store took them")
	}
}

// TestYesterdaysSettlementWaitsForTheStore: a reservation made before UTC
// midnight and settled after it, while the usage store fails, corrects
// yesterday's row once the store is back (300 reserved, 40 used: 40 in the
// row), rather than being dropped.
func TestYesterdaysSettlementWaitsForTheStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &rpdStore{requests: map[string]int64{}, tokens: map[string]int64{}}
	var r State
	l := &Limits{TPD: 1000, GateTPD: "tpd:c"}
	b := Budget{ID: "c", DayID: "c", L: l, R: &r, U: u}
	yesterday := time.Date(2026, 3, 9, 23, 59, 59, 0, time.UTC)
	today := yesterday.Add(2 * time.Second)
	var rs Reservation
	if _, v := rs.Reserve(ctx, Local{}, d, b, 300, yesterday); v != DispatchOK {
		t.Fatalf("reserve before midnight: %v", v)
	}
	u.setFail(true)
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 40}, today)
	if !r.Pending() {
		t.Fatal("the settlement the store failed is not pending")
	}
	u.setFail(false)
	d.Retry()
	d.Flush(ctx, u, "c", &r, l, today, 0, 0)
	if _, tok := u.day("c", yesterday); tok != 40 {
		t.Errorf("store's tokens for yesterday %d, want 40", tok)
	}
}
