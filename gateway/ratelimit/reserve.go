package ratelimit

import (
	"context"
	"time"
)

// Budget reservations (package doc, "Reservations"): before
// a request is dispatched its estimated cost is reserved against every
// budget on its path, all or nothing; when the answer's usage is known the
// reservation is replaced by it, when it is not the reservation stays
// charged, and either happens exactly once.
//
// The amounts are in the budget's own unit: tokens for tpm and tpd,
// micro-dollars for a key's money budgets (spend.go), whose cost of a Usage
// is its price; the all-or-nothing and exactly-once rules are the same.

// Usage is what an answer is known to have cost. Known false (the client
// hung up, the stream broke, the upstream reported nothing): a key's
// reservation stays charged whole (the tenant's risk), and a connection's
// is charged Processed — what the upstream can have processed — so that
// one tenant's abandoned request never takes more of a shared connection
// than that.
type Usage struct {
	Known  bool
	Tokens int64
	// Cost is what the tokens cost at the model's price, in micro-dollars.
	Cost int64
	// Processed is, for an unknown outcome, the input estimate plus the
	// output relayed to the client (its bytes ÷ 4); a connection is charged
	// it, never more than its reservation.
	Processed int64
}

// Released is the Usage of an attempt the upstream did not serve (it
// answered an error status): nothing is charged.
var Released = Usage{Known: true}

// Budget is one connection's or client key's budgets as a reservation sees
// them: their limits, in-process state, and where they are kept.
type Budget struct {
	// ID is the id of the tpm window in the shared store (a connection id,
	// or key:<id> for a client key); DayID the id in U.
	ID, DayID string
	L         *Limits
	R         *State
	// U keeps the day counts behind tpd (nil: memory only).
	U UsageCounter
	// Conn says these are a connection's budgets, shared by every tenant:
	// an unknown outcome charges them Usage.Processed.
	Conn bool
}

// TooLarge reports whether an estimate of tokens (and micros, for the
// money budgets) exceeds the whole size of one of l's day or money
// budgets, so that it can never fit: the Block says which (Whole set),
// until the end of its period. A tpm window is not one of them: it takes
// one request whatever its estimate when empty and pays the debt off over
// the following minutes.
func (l *Limits) TooLarge(tokens, micros int64, now time.Time) (Block, bool) {
	day := utcDay(now).AddDate(0, 0, 1)
	switch {
	case l.TPD > 0 && tokens > l.TPD:
		return Block{Code: CodeTPD, Gate: l.GateTPD, Until: day, Whole: true}, true
	case l.BudgetDay > 0 && micros > l.BudgetDay:
		b := spendBlock(l, SpendDay, now)
		b.Whole = true
		return b, true
	case l.BudgetMonth > 0 && micros > l.BudgetMonth:
		b := spendBlock(l, SpendMonth, now)
		b.Whole = true
		return b, true
	}
	return Block{}, false
}

// Windows takes and gives back tokens of a tpm window: Local (this process)
// or Shared (the store every replica sees, exact across them).
type Windows interface {
	// TakeTPM reserves n tokens in b's window if they fit (any amount fits
	// an empty window); shared says the store holds them.
	TakeTPM(ctx context.Context, b *Budget, n int64, now time.Time) (blk Block, ok, shared bool)
	// GiveTPM replaces a reservation of reserved tokens by actual.
	GiveTPM(ctx context.Context, b *Budget, reserved, actual int64, shared bool, now time.Time)
}

type holdKind uint8

const (
	holdTPM holdKind = iota
	holdTPD
	holdSpend // micro-dollars of a key's money budgets
)

type hold struct {
	b      Budget
	kind   holdKind
	shared bool
	amount int64
	at     time.Time // when it was taken: a tpd or money hold is settled in that day
}

// maxHolds is the most holds one reservation takes: tpm and tpd of a
// client key and of a connection, and the key's money.
const maxHolds = 5

// Reservation is what one request holds of the budgets on its path, from
// its dispatch until its answer's usage is known. The zero value holds
// nothing. Not safe for concurrent use: one request's.
type Reservation struct {
	holds [maxHolds]hold
	n     int
}

// Held reports whether r holds anything.
func (rs *Reservation) Held() bool { return rs.n > 0 }

// Reserve adds amount against b's tpm window and tpd day (those set) to rs.
// When one does not fit, every hold rs has, of b or of an earlier call, is
// given back (all or nothing) and the Block says which budget and until
// when; an amount larger than a budget's whole size never fits (Whole).
// DispatchFailed and DispatchUnavailable give everything back too.
func (rs *Reservation) Reserve(ctx context.Context, w Windows, d *Days, b Budget, amount int64, now time.Time) (blk Block, v Dispatch) {
	if blk, never := b.L.TooLarge(amount, 0, now); never {
		rs.Release(ctx, w, d, now)
		return blk, DispatchSkipped
	}
	if b.L.TPM > 0 {
		h := &rs.holds[rs.n]
		*h = hold{b: b, kind: holdTPM, amount: amount}
		blk, ok, shared := w.TakeTPM(ctx, &h.b, amount, now)
		if !ok {
			*h = hold{}
			rs.Release(ctx, w, d, now)
			return blk, DispatchSkipped
		}
		h.shared = shared
		rs.n++
	}
	if b.L.TPD > 0 {
		h := &rs.holds[rs.n]
		*h = hold{b: b, kind: holdTPD, amount: amount, at: now}
		blk, v := d.TakeTokens(ctx, &h.b, amount, now)
		if v != DispatchOK {
			*h = hold{}
			rs.Release(ctx, w, d, now)
			return blk, v
		}
		rs.n++
	}
	return Block{}, DispatchOK
}

// Holding is what rs holds against r's token budgets (each of them holds
// the same estimate), 0 when nothing.
func (rs *Reservation) Holding(r *State) int64 {
	for i := range rs.n {
		if rs.holds[i].b.R == r && rs.holds[i].kind != holdSpend {
			return rs.holds[i].amount
		}
	}
	return 0
}

// ReserveSpend adds micros against b's money budgets (those set; a cost of
// 0 — a model without a price — holds nothing and is never refused) to rs,
// all or nothing as Reserve.
func (rs *Reservation) ReserveSpend(ctx context.Context, w Windows, d *Days, b Budget, micros int64, now time.Time) (Block, Dispatch) {
	if !b.L.Spends() || micros <= 0 {
		return Block{}, DispatchOK
	}
	if blk, never := b.L.TooLarge(0, micros, now); never {
		rs.Release(ctx, w, d, now)
		return blk, DispatchSkipped
	}
	h := &rs.holds[rs.n]
	*h = hold{b: b, kind: holdSpend, amount: micros, at: now}
	blk, v := d.TakeSpend(ctx, &h.b, micros, now)
	if v != DispatchOK {
		*h = hold{}
		rs.Release(ctx, w, d, now)
		return blk, v
	}
	rs.n++
	return Block{}, DispatchOK
}

// Release gives back everything rs holds: nothing was dispatched.
func (rs *Reservation) Release(ctx context.Context, w Windows, d *Days, now time.Time) {
	rs.Settle(ctx, w, d, Released, now)
}

// Settle replaces every hold of rs by what u costs in its budget (kept as
// reserved when u is not known), once: rs holds nothing after it, and a
// second call does nothing. It runs even when the client (ctx) has gone:
// the tokens were spent all the same.
func (rs *Reservation) Settle(ctx context.Context, w Windows, d *Days, u Usage, now time.Time) {
	for i := range rs.n {
		h := &rs.holds[i]
		actual := h.amount
		switch {
		case u.Known:
			actual = u.Tokens
		case h.b.Conn:
			actual = min(u.Processed, h.amount)
		}
		switch h.kind {
		case holdTPM:
			w.GiveTPM(ctx, &h.b, h.amount, actual, h.shared, now)
			h.b.R.learn(actual, u.Known)
		case holdTPD:
			d.GiveTokens(ctx, &h.b, h.amount, actual, h.at, now)
		case holdSpend:
			actual = h.amount
			if u.Known {
				actual = u.Cost
			}
			d.GiveSpend(ctx, &h.b, h.amount, actual, h.at, now)
		}
		*h = hold{}
	}
	rs.n = 0
}

// Reserved is the amount reserved against r's budgets by requests not yet
// settled (tpm and tpd tokens and money micro-dollars together): 0 when
// every reservation was settled.
func (r *State) Reserved() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return SatAdd(r.reserved, r.money.reserved)
}

// learn moves r's running estimate of tokens per request (which the
// budget check of a connection before choosing it uses) towards a known
// actual.
func (r *State) learn(actual int64, known bool) {
	if !known || actual <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.est == 0 {
		r.est = actual
	} else {
		r.est = (3*r.est + actual + 3) / 4
	}
}

// takeTPM reserves n tokens in r's own tpm window if they fit.
func (r *State) takeTPM(l *Limits, n int64, now time.Time) (Block, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if !tpmRoom(r.used, n, l.TPM) {
		b, _ := tpmBlocked(l, r.used, n, r.minute.Add(time.Minute))
		return b, false
	}
	r.used = SatAdd(r.used, n)
	r.reserved = SatAdd(r.reserved, n)
	return Block{}, true
}

// chargeTPM charges n reserved tokens to r's own window without a check:
// the shared window, which holds this replica's charges too, had room.
func (r *State) chargeTPM(l *Limits, n int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	r.used = SatAdd(r.used, n)
	r.reserved = SatAdd(r.reserved, n)
}

// giveTPM replaces reserved tokens in r's own window by actual.
func (r *State) giveTPM(l *Limits, reserved, actual int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	r.used = max(SatAdd(r.used, SatAdd(actual, -reserved)), 0)
	r.reserved = SatAdd(r.reserved, -reserved)
}

// TakeTPM reserves in r's own window.
func (Local) TakeTPM(_ context.Context, b *Budget, n int64, now time.Time) (Block, bool, bool) {
	blk, ok := b.R.takeTPM(b.L, n, now)
	return blk, ok, false
}

// GiveTPM settles in r's own window.
func (Local) GiveTPM(_ context.Context, b *Budget, reserved, actual int64, _ bool, now time.Time) {
	b.R.giveTPM(b.L, reserved, actual, now)
}

// TakeTPM reserves in the store's window, one atomic step exact across
// replicas, and charges this replica's own window alongside (its fallback);
// while the store is away, in the own window alone.
func (l *Shared) TakeTPM(ctx context.Context, b *Budget, n int64, now time.Time) (Block, bool, bool) {
	if !l.down.up() {
		return Local{}.TakeTPM(ctx, b, n, now)
	}
	// Not cut short by the client leaving: a script cut on our side may
	// still have run, and only its answer says what to give back.
	ok, used, left, err := l.store.ReserveTokens(context.WithoutCancel(ctx), b.ID, b.L.TPM, n)
	if err != nil {
		l.down.failed(err)
		return Local{}.TakeTPM(ctx, b, n, now)
	}
	s := &b.R.shared
	s.mu.Lock()
	s.tpmUsed, s.windowEnd = used, now.Add(left)
	s.mu.Unlock()
	if !ok {
		blk, _ := tpmBlocked(b.L, used, n, now.Add(left))
		return blk, false, false
	}
	b.R.chargeTPM(b.L, n, now)
	return Block{}, true, true
}

// GiveTPM settles in this replica's window and, for a reservation the
// store holds, in the store's.
func (l *Shared) GiveTPM(ctx context.Context, b *Budget, reserved, actual int64, shared bool, now time.Time) {
	b.R.giveTPM(b.L, reserved, actual, now)
	diff := SatAdd(actual, -reserved)
	if !shared || diff == 0 || !l.down.up() {
		// Store away: its window keeps the whole reservation, which
		// overcharges, never undercharges.
		return
	}
	s := &b.R.shared
	s.mu.Lock()
	s.tpmUsed = max(SatAdd(s.tpmUsed, diff), 0)
	s.mu.Unlock()
	if err := l.store.AddTokens(context.WithoutCancel(ctx), b.ID, b.L.TPM, diff); err != nil {
		l.down.failed(err)
	}
}
