package ratelimit

import (
	"context"
	"time"
)

// The day (tpd) side of a reservation: the usage store's conditional add,
// exact across replicas and restarts, with memory as the fallback while the
// store is away (fail-open, as for rpd: enforced against what memory knows;
// or refused, when Days fails closed).

// TakeTokens reserves n tokens of b's day budget (b.L.TPD > 0). ctx is the
// client's; the store's answer is waited for even when the client leaves
// meanwhile (a statement cut on our side may still have run in the store:
// only its answer says what is held, and so what to give back). A
// statement the store refuses is DispatchFailed, its error in the Block.
func (d *Days) TakeTokens(ctx context.Context, b *Budget, n int64, now time.Time) (Block, Dispatch) {
	r, l, u := b.R, b.L, b.U
	if u != nil && d.down.up() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), usageTimeout)
		total, ok, err := u.ReserveTokens(cctx, b.DayID, now, n, l.TPD)
		if err == nil {
			r.mu.Lock()
			r.rolloverLocked(l, now)
			r.tokens = max(r.tokens, SatAdd(total, r.pendTok))
			if ok {
				r.reserved = SatAdd(r.reserved, n)
			}
			pending := r.pendingLocked()
			midnight := r.day.AddDate(0, 0, 1)
			r.mu.Unlock()
			if pending {
				d.Flush(cctx, u, b.DayID, r, l, now, 0, 0)
			}
			cancel()
			if !ok {
				return Block{Code: CodeTPD, Gate: l.GateTPD, Until: midnight}, DispatchSkipped
			}
			return Block{}, DispatchOK
		}
		cancel()
		if !storeAway(err) {
			return Block{Err: err}, DispatchFailed
		}
		d.down.failed(err)
	}
	if u != nil && d.closed {
		return Block{}, DispatchUnavailable
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if SatAdd(r.tokens, n) > l.TPD {
		return Block{Code: CodeTPD, Gate: l.GateTPD, Until: r.day.AddDate(0, 0, 1)}, DispatchSkipped
	}
	r.tokens = SatAdd(r.tokens, n)
	r.reserved = SatAdd(r.reserved, n)
	if u != nil {
		r.pendTok = SatAdd(r.pendTok, n)
	}
	return Block{}, DispatchOK
}

// GiveTokens replaces reserved tokens of b's day by actual: in memory at
// once, in the usage store with the next successful call (this one, unless
// the store is away). A reservation made at on an earlier UTC day than now
// is settled in that day's row of the store (memory has moved on), now or,
// while the store is away, with the next successful call. It runs even if
// the client (ctx) has gone.
func (d *Days) GiveTokens(ctx context.Context, b *Budget, reserved, actual int64, at, now time.Time) {
	r, l := b.R, b.L
	diff := SatAdd(actual, -reserved)
	r.mu.Lock()
	r.reserved = SatAdd(r.reserved, -reserved)
	r.rolloverLocked(l, now)
	sameDay := r.day.Equal(utcDay(at))
	if sameDay {
		r.tokens = max(SatAdd(r.tokens, diff), 0)
	}
	r.mu.Unlock()
	if diff == 0 || b.U == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), usageTimeout)
	defer cancel()
	if !sameDay {
		keep := !d.down.up()
		if !keep {
			_, err := b.U.AddUsage(ctx, b.DayID, at, 0, diff)
			keep = err != nil && d.settleFailed(err)
		}
		if keep {
			r.mu.Lock()
			r.carry = append(r.carry, dayPend{day: utcDay(at), tok: diff})
			r.mu.Unlock()
		}
		return
	}
	d.Flush(ctx, b.U, b.DayID, r, l, now, 0, diff)
}
