package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// outageStore is a UsageCounter and SpendCounter in memory that a test can
// cut (away: every call fails as unreachable) or make answer one call of
// AddUsage with a given error (next).
type outageStore struct {
	mu     sync.Mutex
	away   bool
	next   error
	tokens map[string]int64 // id + " " + day
	spend  map[string]int64 // id + " d " + day, id + " m " + month
	calls  int
}

func newOutageStore() *outageStore {
	return &outageStore{tokens: map[string]int64{}, spend: map[string]int64{}}
}

var errAway = fmt.Errorf("connection refused: %w", ErrStoreUnavailable)

func (s *outageStore) cut(away bool) {
	s.mu.Lock()
	s.away = away
	s.mu.Unlock()
}

func (s *outageStore) dayKey(id string, t time.Time) string {
	return id + " " + utcDay(t).Format(time.DateOnly)
}

func (s *outageStore) tokensOf(id string, t time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[s.dayKey(id, t)]
}

func (s *outageStore) spendOf(id string, t time.Time) Spend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Spend{Day: s.spend[id+" d "+utcDay(t).Format(time.DateOnly)], Month: s.spend[id+" m "+utcMonth(t).Format(time.DateOnly)]}
}

func (s *outageStore) CountRequest(context.Context, string, time.Time, int64) (int64, bool, error) {
	return 0, false, errors.New("not used")
}

func (s *outageStore) AddUsage(_ context.Context, id string, day time.Time, _, tokens int64) (DayUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.away {
		return DayUsage{}, errAway
	}
	if err := s.next; err != nil {
		s.next = nil
		return DayUsage{}, err
	}
	s.tokens[s.dayKey(id, day)] += tokens
	return DayUsage{Tokens: s.tokens[s.dayKey(id, day)]}, nil
}

func (s *outageStore) ReserveTokens(_ context.Context, id string, day time.Time, tokens, limit int64) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.away {
		return 0, false, errAway
	}
	k := s.dayKey(id, day)
	if s.tokens[k]+tokens > limit {
		return s.tokens[k], false, nil
	}
	s.tokens[k] += tokens
	return s.tokens[k], true, nil
}

func (s *outageStore) DayUsage(context.Context, time.Time) (map[string]DayUsage, error) {
	return nil, errors.New("not used")
}

func (s *outageStore) ReserveSpend(_ context.Context, id string, at time.Time, micros, dayLimit, monthLimit int64) (Spend, SpendPeriod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.away {
		return Spend{}, 0, errAway
	}
	d, m := id+" d "+utcDay(at).Format(time.DateOnly), id+" m "+utcMonth(at).Format(time.DateOnly)
	if dayLimit > 0 && s.spend[d]+micros > dayLimit {
		return Spend{Day: s.spend[d], Month: s.spend[m]}, SpendDay, nil
	}
	if monthLimit > 0 && s.spend[m]+micros > monthLimit {
		return Spend{Day: s.spend[d], Month: s.spend[m]}, SpendMonth, nil
	}
	s.spend[d] += micros
	s.spend[m] += micros
	return Spend{Day: s.spend[d], Month: s.spend[m]}, SpendFits, nil
}

func (s *outageStore) AddSpend(_ context.Context, id string, at time.Time, micros int64) (Spend, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.away {
		return Spend{}, errAway
	}
	d, m := id+" d "+utcDay(at).Format(time.DateOnly), id+" m "+utcMonth(at).Format(time.DateOnly)
	s.spend[d] = max(s.spend[d]+micros, 0)
	s.spend[m] = max(s.spend[m]+micros, 0)
	return Spend{Day: s.spend[d], Month: s.spend[m]}, nil
}

func (s *outageStore) Spend(context.Context, string, time.Time) (Spend, error) {
	return Spend{}, errors.New("not used")
}

// TestOutageSpendReachesItsRows: what a single process counts in memory
// while the store is away reaches the store's rows when it returns — every
// token and micro-dollar, settlements above their estimate included, each
// in the day (and month) it belongs to, across a midnight that is also a
// month's end, and a request reserved before midnight and settled after.
// Before, a settlement above its estimate was dropped while the store was
// away, and memory's pending counts were reset at midnight.
func TestOutageSpendReachesItsRows(t *testing.T) {
	t.Parallel()
	d := NewDays(slog.New(slog.DiscardHandler))
	st := newOutageStore()
	var r State
	b := Budget{ID: "key:k", DayID: "k", R: &r, U: st,
		L: &Limits{TPD: 1 << 40, GateTPD: "key-tpd:k", BudgetDay: 1 << 40, BudgetMonth: 1 << 40, GateBudget: "key-budget:k"}}
	ctx := t.Context()
	jan := time.Date(2026, 1, 31, 23, 59, 0, 0, time.UTC)
	feb := time.Date(2026, 2, 1, 0, 0, 30, 0, time.UTC)
	reserve := func(rs *Reservation, at time.Time, tokens, micros int64) {
		t.Helper()
		if _, v := rs.Reserve(ctx, Local{}, d, b, tokens, at); v != DispatchOK {
			t.Fatalf("reserve %d tokens at %v: %v", tokens, at, v)
		}
		if _, v := rs.ReserveSpend(ctx, Local{}, d, b, micros, at); v != DispatchOK {
			t.Fatalf("reserve %d micros at %v: %v", micros, at, v)
		}
	}

	st.cut(true)
	var rs1, rs2, rs3 Reservation
	reserve(&rs1, jan, 100, 1_000)
	rs1.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 300, Cost: 5_000}, jan) // above its estimate
	reserve(&rs2, jan, 100, 1_000)
	rs2.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 250, Cost: 4_000}, feb) // settled after midnight
	reserve(&rs3, feb, 100, 1_000)
	rs3.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 400, Cost: 7_000}, feb)
	var lost Reservation
	reserve(&lost, feb, 100, 1_000)
	lost.Settle(ctx, Local{}, d, Usage{}, feb) // unknown outcome: the key keeps its reservation

	st.cut(false)
	d.Retry()
	var rs4 Reservation
	reserve(&rs4, feb, 10, 10)
	rs4.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 10, Cost: 10}, feb)

	if got, want := st.tokensOf("k", jan), int64(300+250); got != want {
		t.Errorf("Jan 31 tokens in the store = %d, want %d", got, want)
	}
	if got, want := st.tokensOf("k", feb), int64(400+100+10); got != want {
		t.Errorf("Feb 1 tokens in the store = %d, want %d", got, want)
	}
	if got, want := st.spendOf("k", jan), (Spend{Day: 5_000 + 4_000, Month: 5_000 + 4_000}); got != want {
		t.Errorf("Jan spend in the store = %+v, want %+v", got, want)
	}
	if got, want := st.spendOf("k", feb), (Spend{Day: 7_000 + 1_000 + 10, Month: 7_000 + 1_000 + 10}); got != want {
		t.Errorf("Feb spend in the store = %+v, want %+v", got, want)
	}
	if got := r.Reserved(); got != 0 {
		t.Errorf("Reserved() = %d, want 0", got)
	}
}

// TestCancelledFlushKeepsStore: a flush cut short by the caller going away
// is not the store failing: the store stays in use (no switch to memory)
// and the amounts stay pending for the next call.
func TestCancelledFlushKeepsStore(t *testing.T) {
	t.Parallel()
	d := NewDays(slog.New(slog.DiscardHandler))
	st := newOutageStore()
	var r State
	l := &Limits{TPD: 1 << 40, GateTPD: "tpd:c"}
	b := Budget{ID: "c", DayID: "c", R: &r, U: st, L: l, Conn: true}
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	st.cut(true)
	var rs Reservation
	if _, v := rs.Reserve(ctx, Local{}, d, b, 100, now); v != DispatchOK {
		t.Fatalf("reserve while away: %v", v)
	}
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 70}, now)
	st.cut(false)
	d.Retry()
	st.mu.Lock()
	st.next = context.Canceled
	st.mu.Unlock()
	var rs2 Reservation
	if _, v := rs2.Reserve(ctx, Local{}, d, b, 5, now); v != DispatchOK { // its flush is cancelled
		t.Fatalf("reserve: %v", v)
	}
	rs2.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 5}, now)
	if !d.down.up() {
		t.Fatalf("a cancelled flush switched the store off")
	}
	var rs3 Reservation
	if _, v := rs3.Reserve(ctx, Local{}, d, b, 1, now); v != DispatchOK {
		t.Fatalf("reserve: %v", v)
	}
	rs3.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 1}, now)
	if got := st.tokensOf("c", now); got != 76 {
		t.Errorf("store holds %d tokens, want 76 (the pending 70 written with the next call)", got)
	}
}

// TestFailClosedRefusesDayBudgets: with Days failing closed (cluster
// mode), day and money budgets refuse while the store is away, and hold
// nothing; a tpm-only budget is unaffected.
func TestFailClosedRefusesDayBudgets(t *testing.T) {
	t.Parallel()
	d := NewDays(slog.New(slog.DiscardHandler)).FailClosed()
	st := newOutageStore()
	st.cut(true)
	var r State
	ctx := t.Context()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	b := Budget{ID: "key:k", DayID: "k", R: &r, U: st,
		L: &Limits{TPD: 1000, GateTPD: "key-tpd:k", BudgetDay: 1000, GateBudget: "key-budget:k"}}
	var rs Reservation
	if _, v := rs.Reserve(ctx, Local{}, d, b, 10, now); v != DispatchUnavailable {
		t.Errorf("tpd with the store away: %v, want DispatchUnavailable", v)
	}
	if _, v := rs.ReserveSpend(ctx, Local{}, d, b, 10, now); v != DispatchUnavailable {
		t.Errorf("money with the store away: %v, want DispatchUnavailable", v)
	}
	if v, _ := d.CountRequest(ctx, st, "c", &r, &Limits{RPD: 10}, now); v != DispatchUnavailable {
		t.Errorf("rpd with the store away: %v, want DispatchUnavailable", v)
	}
	if rs.Held() || r.Reserved() != 0 {
		t.Errorf("a refused reservation holds %d", r.Reserved())
	}
	tpm := Budget{ID: "c", DayID: "c", R: &State{}, U: st, L: &Limits{TPM: 1000, GateTPM: "tpm:c"}}
	if _, v := rs.Reserve(ctx, Local{}, d, tpm, 10, now); v != DispatchOK {
		t.Errorf("tpm only: %v, want DispatchOK", v)
	}
}
