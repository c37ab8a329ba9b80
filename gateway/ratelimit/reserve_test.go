package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// dayStore is a UsageCounter that keeps tokens per id and UTC day.
type dayStore struct {
	mu     sync.Mutex
	tokens map[string]int64 // id + " " + day
}

func (s *dayStore) at(id string, day time.Time) string {
	return id + " " + utcDay(day).Format(time.DateOnly)
}

func (s *dayStore) get(id string, day time.Time) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[s.at(id, day)]
}

func (s *dayStore) CountRequest(context.Context, string, time.Time, int64) (int64, bool, error) {
	return 0, false, errors.New("not used")
}

func (s *dayStore) AddUsage(_ context.Context, id string, day time.Time, _, tokens int64) (DayUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[s.at(id, day)] += tokens
	return DayUsage{Tokens: s.tokens[s.at(id, day)]}, nil
}

func (s *dayStore) ReserveTokens(_ context.Context, id string, day time.Time, tokens, limit int64) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.at(id, day)
	if s.tokens[k]+tokens > limit {
		return s.tokens[k], false, nil
	}
	s.tokens[k] += tokens
	return s.tokens[k], true, nil
}

func (s *dayStore) DayUsage(context.Context, time.Time) (map[string]DayUsage, error) {
	return nil, errors.New("not used")
}

// TestReservationAllOrNothing: a reservation that fits the key's tpm and tpd
// but not the connection's tpd holds nothing afterwards — the key's holds
// are given back — and says which budget refused it.
func TestReservationAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &dayStore{tokens: map[string]int64{}}
	var keyR, connR State
	keyL := &Limits{TPM: 1000, TPD: 1000, GateTPM: "key-tpm:k", GateTPD: "key-tpd:k"}
	connL := &Limits{TPD: 300, GateTPD: "tpd:c"}
	key := Budget{ID: "key:k", DayID: "k", L: keyL, R: &keyR, U: u}
	conn := Budget{ID: "c", DayID: "c", L: connL, R: &connR, U: u}

	var first Reservation
	if _, v := first.Reserve(ctx, Local{}, d, key, 200, t0); v != DispatchOK {
		t.Fatalf("key reservation: %v", v)
	}
	if _, v := first.Reserve(ctx, Local{}, d, conn, 200, t0); v != DispatchOK {
		t.Fatalf("connection reservation: %v", v)
	}
	var second Reservation
	if _, v := second.Reserve(ctx, Local{}, d, key, 200, t0); v != DispatchOK {
		t.Fatalf("second key reservation: %v", v)
	}
	blk, v := second.Reserve(ctx, Local{}, d, conn, 200, t0)
	if v != DispatchSkipped || blk.Code != CodeTPD || blk.Gate != "tpd:c" {
		t.Fatalf("second connection reservation = %+v, %v; want skipped at tpd:c", blk, v)
	}
	if second.Held() {
		t.Error("a refused reservation still holds something")
	}
	if got := u.get("k", t0); got != 200 {
		t.Errorf("key's day tokens = %d, want 200 (the refused reservation's given back)", got)
	}
	if got, want := keyR.Reserved(), int64(400); got != want {
		t.Errorf("key reserved = %d, want %d (tpm and tpd of the first)", got, want)
	}
	first.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 120}, t0)
	first.Settle(ctx, Local{}, d, Released, t0) // a second settlement does nothing
	if keyR.Reserved() != 0 || connR.Reserved() != 0 {
		t.Errorf("reserved after settling: key %d, connection %d; want 0", keyR.Reserved(), connR.Reserved())
	}
	if k, c := u.get("k", t0), u.get("c", t0); k != 120 || c != 120 {
		t.Errorf("day tokens after settling at 120: key %d, connection %d; want 120 each", k, c)
	}
}

// TestReservationUnknownUsageStaysCharged: a settlement without a known
// usage (the client hung up) keeps the whole reservation charged, in the
// minute window and the day; an upstream error (Released) charges nothing.
func TestReservationUnknownUsageStaysCharged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &dayStore{tokens: map[string]int64{}}
	var r State
	l := &Limits{TPM: 1000, TPD: 1000, GateTPM: "tpm:c", GateTPD: "tpd:c"}
	b := Budget{ID: "c", DayID: "c", L: l, R: &r, U: u}
	for _, tc := range []struct {
		u    Usage
		want int64
	}{{Usage{}, 250}, {Released, 250}, {Usage{Known: true, Tokens: 10}, 260}} {
		var rs Reservation
		if _, v := rs.Reserve(ctx, Local{}, d, b, 250, t0); v != DispatchOK {
			t.Fatalf("reserve: %v", v)
		}
		rs.Settle(ctx, Local{}, d, tc.u, t0)
		if got := u.get("c", t0); got != tc.want {
			t.Errorf("after settling with %+v: day tokens %d, want %d", tc.u, got, tc.want)
		}
		r.mu.Lock()
		used := r.used
		r.mu.Unlock()
		if used != tc.want {
			t.Errorf("after settling with %+v: tpm window %d, want %d", tc.u, used, tc.want)
		}
	}
	if r.Reserved() != 0 {
		t.Errorf("reserved = %d, want 0", r.Reserved())
	}
}

// TestReservationSettledOnItsDay: a reservation taken before midnight and
// settled after it corrects the day it was taken on, never the new day's
// count (which it would push below zero).
func TestReservationSettledOnItsDay(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := NewDays(slog.New(slog.DiscardHandler))
	u := &dayStore{tokens: map[string]int64{}}
	var r State
	b := Budget{ID: "c", DayID: "c", L: &Limits{TPD: 1000, GateTPD: "tpd:c"}, R: &r, U: u}
	late := time.Date(2026, 1, 2, 23, 59, 59, 0, time.UTC)
	var rs Reservation
	if _, v := rs.Reserve(ctx, Local{}, d, b, 300, late); v != DispatchOK {
		t.Fatalf("reserve: %v", v)
	}
	next := late.Add(2 * time.Second)
	rs.Settle(ctx, Local{}, d, Usage{Known: true, Tokens: 40}, next)
	if y, n := u.get("c", late), u.get("c", next); y != 40 || n != 0 {
		t.Errorf("day tokens: yesterday %d, today %d; want 40 and 0", y, n)
	}
	if b, blocked := r.Blocked(b.L, next); blocked {
		t.Errorf("today blocked by yesterday's reservation: %+v", b)
	}
	if r.Reserved() != 0 {
		t.Errorf("reserved = %d, want 0", r.Reserved())
	}
}
