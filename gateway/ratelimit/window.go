package ratelimit

import (
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// The windows of a State's budgets in this process: the UTC day of rpd/tpd
// (a cache of the usage store's counts, daycount.go) and the tpm minute
// window with its debt; both follow the caller's clock (now).

func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// rolloverLocked starts a new day or minute window when now has reached
// it. Debt in the tpm window is paid off at tpm tokens per minute.
func (r *State) rolloverLocked(l *Limits, now time.Time) {
	if day := utcDay(now); day.After(r.day) {
		if r.pendReq != 0 || r.pendTok != 0 {
			// Counted while the store was away: still owed to that day's row.
			r.carry = append(r.carry, dayPend{day: r.day, req: r.pendReq, tok: r.pendTok})
		}
		r.day = day
		r.requests, r.tokens, r.pendReq, r.pendTok = 0, 0, 0, 0
	}
	m := now.UTC().Truncate(time.Minute)
	if !m.After(r.minute) {
		return
	}
	if !r.minute.IsZero() && l.TPM > 0 {
		k := int64(m.Sub(r.minute) / time.Minute)
		if r.used = SatAdd(r.used, -SatMul(min(k, 1<<20), l.TPM)); r.used < 0 {
			r.used = 0
		}
	} else {
		r.used = 0
	}
	r.minute, r.minuteReqs = m, 0
}

// tpmRoom reports whether a window with used tokens has room for a request
// estimated at est: anything under the limit when nothing is known yet, and
// always one request in an empty window, whatever its estimate.
func tpmRoom(used, est, tpm int64) bool {
	return used <= 0 || (used < tpm && SatAdd(used, est) <= tpm)
}

// tpmBlocked reports whether a tpm window with used tokens, ending at end,
// keeps out a request estimated at est, and until when: debt is paid off at
// tpm tokens per minute, for at most a day.
func tpmBlocked(l *Limits, used, est int64, end time.Time) (Block, bool) {
	if tpmRoom(used, est, l.TPM) {
		return Block{}, false
	}
	k := int64(1)
	for ; k < 24*60; k++ {
		if tpmRoom(max(SatAdd(used, -SatMul(k, l.TPM)), 0), est, l.TPM) {
			break
		}
	}
	return Block{Code: CodeTPM, Gate: l.GateTPM, Until: end.Add(time.Duration(k-1) * time.Minute)}, true
}

// dayBlockedLocked reports whether an exhausted daily budget keeps the
// connection out until midnight. r.mu must be held, rolled over to now.
func (r *State) dayBlockedLocked(l *Limits) (Block, bool) {
	midnight := r.day.AddDate(0, 0, 1)
	switch {
	case l.RPD > 0 && r.requests >= l.RPD:
		return Block{Code: CodeRPD, Gate: l.GateRPD, Until: midnight}, true
	case l.TPD > 0 && r.tokens >= l.TPD:
		return Block{Code: CodeTPD, Gate: l.GateTPD, Until: midnight}, true
	}
	return Block{}, false
}

// Blocked reports whether an exhausted budget of l keeps r out at now.
func (r *State) Blocked(l *Limits, now time.Time) (Block, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	if b, ok := r.dayBlockedLocked(l); ok {
		return b, true
	}
	if l.TPM > 0 {
		return tpmBlocked(l, r.used, r.est, r.minute.Add(time.Minute))
	}
	return Block{}, false
}

// Budgets reports r's windows for the live view; nil without any.
func (r *State) Budgets(l *Limits, now time.Time) map[string]live.Budget {
	if l.RPM == 0 && !l.Budgeted() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	midnight := r.day.AddDate(0, 0, 1)
	next := r.minute.Add(time.Minute)
	m := make(map[string]live.Budget, 4)
	if l.RPM > 0 {
		m[live.BudgetRPM] = live.Budget{Limit: l.RPM, Remaining: max(l.RPM-r.minuteReqs, 0), ResetAt: next}
	}
	if l.RPD > 0 {
		m[live.BudgetRPD] = live.Budget{Limit: l.RPD, Remaining: max(l.RPD-r.requests, 0), ResetAt: midnight}
	}
	if l.TPM > 0 {
		m[live.BudgetTPM] = live.Budget{Limit: l.TPM, Remaining: l.TPM - r.used, ResetAt: next}
	}
	if l.TPD > 0 {
		m[live.BudgetTPD] = live.Budget{Limit: l.TPD, Remaining: max(l.TPD-r.tokens, 0), ResetAt: midnight}
	}
	return m
}

// CountDispatch counts a dispatch in r's minute (the rpm display count);
// its tokens are held by a Reservation (reserve.go).
func (r *State) CountDispatch(l *Limits, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rolloverLocked(l, now)
	r.minuteReqs++
}
