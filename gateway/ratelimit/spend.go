package ratelimit

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// Money budgets (a client key's budgetUsdDaily and budgetUsdMonthly): a
// reservation's third kind, whose amounts are micro-dollars — the price of
// the request's estimate at its model's price, and of its usage when the
// answer says. Counted per UTC day and UTC month in a SpendCounter (the
// store's key_spend_reserved, exact across replicas and restarts), with
// memory as the fallback while it is away, as for tpd.

// CodeBudget is the code of a money budget's rejection.
const CodeBudget = "BUDGET_EXCEEDED"

// SpendPeriod names the money budget a reservation did not fit.
type SpendPeriod uint8

const (
	SpendFits  SpendPeriod = iota // it fitted both
	SpendDay                      // the UTC day's budget
	SpendMonth                    // the UTC month's budget
)

// Spend is a key's spend, reservations included, in micro-dollars: of one
// UTC day and of the UTC month holding it.
type Spend struct {
	Day, Month int64
}

// SpendCounter keeps the money budgets' counts, shared by every gateway
// replica. A Budget's U that also implements it keeps its key's money
// budgets; without one they are counted in memory only. Every method must be
// safe for concurrent use; at is any instant of the day (and month) meant.
type SpendCounter interface {
	// ReserveSpend adds micros to id's day and month if the day's stays
	// within dayLimit and the month's within monthLimit (≤ 0: none), both
	// or neither in one atomic step. It returns the spend after the call
	// and which budget it did not fit (SpendFits: added).
	ReserveSpend(ctx context.Context, id string, at time.Time, micros, dayLimit, monthLimit int64) (Spend, SpendPeriod, error)
	// AddSpend adds micros (negative: gives back; never below 0) to id's
	// day and month and returns the spend after.
	AddSpend(ctx context.Context, id string, at time.Time, micros int64) (Spend, error)
	// Spend returns id's spend of the day and month holding at.
	Spend(ctx context.Context, id string, at time.Time) (Spend, error)
}

// spendState is a State's money count (guarded by State.mu).
type spendState struct {
	day, month time.Time // UTC day and month the counts are for
	spend      Spend
	pend       int64 // counted in memory while the store was away, of day
	reserved   int64 // held by reservations not yet settled
	// carry is what was counted in memory for earlier days while the
	// store was away, owed to those days' (and months') rows.
	carry []spendPend
}

// spendPend is micro-dollars counted in memory for one earlier UTC day
// while the store was away.
type spendPend struct {
	day    time.Time
	micros int64
}

// pendMonthLocked is what s holds pending for the month m (this day's and
// carried days').
func (s *spendState) pendMonthLocked(m time.Time) int64 {
	n := s.pend
	for _, c := range s.carry {
		if utcMonth(c.day).Equal(m) {
			n = SatAdd(n, c.micros)
		}
	}
	return n
}

// utcMonth is the first instant of the UTC month holding t.
func utcMonth(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// rolloverSpendLocked starts a new day or month when now has reached it.
func (r *State) rolloverSpendLocked(now time.Time) {
	s := &r.money
	if m := utcMonth(now); m.After(s.month) {
		s.month, s.spend.Month = m, 0
	}
	if d := utcDay(now); d.After(s.day) {
		if s.pend != 0 {
			s.carry = append(s.carry, spendPend{day: s.day, micros: s.pend})
		}
		s.day, s.spend.Day, s.pend = d, 0, 0
	}
}

// spendBlock is the rejection of a money budget p, until its period ends.
func spendBlock(l *Limits, p SpendPeriod, now time.Time) Block {
	until, limit := utcDay(now).AddDate(0, 0, 1), limits.KeyBudgetUSDDaily
	if p == SpendMonth {
		until, limit = utcMonth(now).AddDate(0, 1, 0), limits.KeyBudgetUSDMonthly
	}
	return Block{Code: CodeBudget, Gate: l.GateBudget, Until: until, Limit: limit}
}

// SpendBlocked reports whether a reservation of micros would not fit l's money
// budgets at r's spend as this process knows it (SpendNow: the store's latest
// figures and what was counted since, reservations included), with the
// block TakeSpend would answer. It reserves nothing: a key whose budget is
// spent is refused before it queues, and TakeSpend still decides at dispatch.
func (r *State) SpendBlocked(l *Limits, micros int64, now time.Time) (Block, bool) {
	sp := r.SpendNow(now)
	switch {
	case l.BudgetDay > 0 && SatAdd(sp.Day, micros) > l.BudgetDay:
		return spendBlock(l, SpendDay, now), true
	case l.BudgetMonth > 0 && SatAdd(sp.Month, micros) > l.BudgetMonth:
		return spendBlock(l, SpendMonth, now), true
	}
	return Block{}, false
}

// TakeSpend reserves micros of b's money budgets (b.L.Spends()), in the
// SpendCounter b.U implements, or in memory while it is away (refused when
// d fails closed) or there is none. ctx is the client's; the store's answer
// is waited for even when the client leaves meanwhile (only it says what is
// held). A statement the store refuses is DispatchFailed.
func (d *Days) TakeSpend(ctx context.Context, b *Budget, micros int64, now time.Time) (Block, Dispatch) {
	r, l := b.R, b.L
	sc, _ := b.U.(SpendCounter)
	if sc != nil && d.down.up() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), usageTimeout)
		defer cancel()
		sp, p, err := sc.ReserveSpend(cctx, b.DayID, now, micros, l.BudgetDay, l.BudgetMonth)
		if err == nil {
			r.mu.Lock()
			r.rolloverSpendLocked(now)
			s := &r.money
			s.spend.Day = max(s.spend.Day, SatAdd(sp.Day, s.pend))
			s.spend.Month = max(s.spend.Month, SatAdd(sp.Month, s.pendMonthLocked(s.month)))
			if p == SpendFits {
				s.reserved = SatAdd(s.reserved, micros)
			}
			r.mu.Unlock()
			d.flushSpend(cctx, sc, b.DayID, r, now)
			if p != SpendFits {
				return spendBlock(l, p, now), DispatchSkipped
			}
			return Block{}, DispatchOK
		}
		if !storeAway(err) {
			return Block{Err: err}, DispatchFailed
		}
		d.down.failed(err)
	}
	if sc != nil && d.closed {
		return Block{}, DispatchUnavailable
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverSpendLocked(now)
	s := &r.money
	switch {
	case l.BudgetDay > 0 && SatAdd(s.spend.Day, micros) > l.BudgetDay:
		return spendBlock(l, SpendDay, now), DispatchSkipped
	case l.BudgetMonth > 0 && SatAdd(s.spend.Month, micros) > l.BudgetMonth:
		return spendBlock(l, SpendMonth, now), DispatchSkipped
	}
	s.spend.Day = SatAdd(s.spend.Day, micros)
	s.spend.Month = SatAdd(s.spend.Month, micros)
	s.reserved = SatAdd(s.reserved, micros)
	if sc != nil {
		s.pend = SatAdd(s.pend, micros)
	}
	return Block{}, DispatchOK
}

// FlushSpend writes what r counted in memory of its money budgets while
// the store was away into their rows (the id is the key's), now unless the
// store is still away.
func (d *Days) FlushSpend(ctx context.Context, sc SpendCounter, id string, r *State, now time.Time) {
	d.flushSpend(ctx, sc, id, r, now)
}

// flushSpend writes what r counted in memory while the store was away
// into the rows of the days it was counted on (and their months); while
// the store is away again it stays pending.
func (d *Days) flushSpend(ctx context.Context, sc SpendCounter, id string, r *State, now time.Time) {
	r.mu.Lock()
	r.rolloverSpendLocked(now)
	s := &r.money
	todo := append(s.carry, spendPend{day: s.day, micros: s.pend})
	s.carry, s.pend = nil, 0
	r.mu.Unlock()
	var keep []spendPend
	up := d.down.up()
	for _, c := range todo {
		if c.micros == 0 {
			continue
		}
		if !up {
			keep = append(keep, c)
			continue
		}
		if _, err := sc.AddSpend(ctx, id, c.day, c.micros); err != nil && d.settleFailed(err) {
			keep = append(keep, c)
			up = false
		}
	}
	if len(keep) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverSpendLocked(now)
	for _, c := range keep {
		if c.day.Equal(s.day) {
			s.pend = SatAdd(s.pend, c.micros)
		} else {
			s.carry = append(s.carry, c)
		}
	}
}

// GiveSpend replaces reserved micros of b's money budgets by actual, in
// the period the reservation was made at: in memory at once, in the store
// now — or, while it is away, with the next successful call, into the
// day's and month's rows of at. It runs even if the client (ctx) has gone.
func (d *Days) GiveSpend(ctx context.Context, b *Budget, reserved, actual int64, at, now time.Time) {
	r := b.R
	diff := SatAdd(actual, -reserved)
	r.mu.Lock()
	r.rolloverSpendLocked(now)
	s := &r.money
	s.reserved = SatAdd(s.reserved, -reserved)
	if s.day.Equal(utcDay(at)) {
		s.spend.Day = max(SatAdd(s.spend.Day, diff), 0)
	}
	if s.month.Equal(utcMonth(at)) {
		s.spend.Month = max(SatAdd(s.spend.Month, diff), 0)
	}
	r.mu.Unlock()
	sc, _ := b.U.(SpendCounter)
	if diff == 0 || sc == nil {
		return
	}
	keep := !d.down.up()
	if !keep {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), usageTimeout)
		_, err := sc.AddSpend(cctx, b.DayID, at, diff)
		cancel()
		keep = err != nil && d.settleFailed(err)
	}
	if !keep {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if day := utcDay(at); day.Equal(s.day) {
		s.pend = SatAdd(s.pend, diff)
	} else {
		s.carry = append(s.carry, spendPend{day: day, micros: diff})
	}
}

// SpendNow is r's money spend, reservations included, of now's UTC day and
// month as this process knows it: the store's figures as of its latest
// answer, plus what was counted since.
func (r *State) SpendNow(now time.Time) Spend {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverSpendLocked(now)
	return r.money.spend
}

// LoadSpend raises r's money counts to the store's sp, never lowering them.
func (r *State) LoadSpend(now time.Time, sp Spend) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverSpendLocked(now)
	r.money.spend.Day = max(r.money.spend.Day, SatAdd(sp.Day, r.money.pend))
	r.money.spend.Month = max(r.money.spend.Month, SatAdd(sp.Month, r.money.pendMonthLocked(r.money.month)))
}

// EstimateCost is what an estimate of in input and out output tokens costs
// at the model's price r, in micro-dollars (rounded up); 0 for a model
// without a price, which a money budget then never refuses.
func EstimateCost(r limits.Rate, in, out int64) int64 {
	return int64(r.Cost(in, 0, 0, out))
}

// SpendOf is b's money spend of now's UTC day and month, reservations
// included: the store's (raising memory's), or memory's while the store is
// away or there is none.
func (d *Days) SpendOf(ctx context.Context, b *Budget, now time.Time) Spend {
	if sc, _ := b.U.(SpendCounter); sc != nil && d.down.up() {
		cctx, cancel := context.WithTimeout(ctx, usageTimeout)
		sp, err := sc.Spend(cctx, b.DayID, now)
		cancel()
		if err == nil {
			b.R.LoadSpend(now, sp)
		}
	}
	return b.R.SpendNow(now)
}

// SpendBudget is one money budget as a key's client sees it: limit and
// what is left (micro-dollars) and when it resets.
type SpendBudget struct {
	Limit, Remaining int64
	ResetAt          time.Time
}

// SpendBudgets are l's money budgets set (by their limit's name,
// budgetUsdDaily and budgetUsdMonthly) at spend sp.
func SpendBudgets(l *Limits, sp Spend, now time.Time) map[string]SpendBudget {
	out := map[string]SpendBudget{}
	if l.BudgetDay > 0 {
		out[limits.KeyBudgetUSDDaily] = SpendBudget{Limit: l.BudgetDay, Remaining: max(l.BudgetDay-sp.Day, 0), ResetAt: utcDay(now).AddDate(0, 0, 1)}
	}
	if l.BudgetMonth > 0 {
		out[limits.KeyBudgetUSDMonthly] = SpendBudget{Limit: l.BudgetMonth, Remaining: max(l.BudgetMonth-sp.Month, 0), ResetAt: utcMonth(now).AddDate(0, 1, 0)}
	}
	return out
}
