package ratelimit

import (
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// The codes of rate-limit rejections (the gateway's error.code).
const (
	CodeRPM = "RATE_LIMIT_RPM"
	CodeRPD = "RATE_LIMIT_RPD"
	CodeTPM = "RATE_LIMIT_TPM"
	CodeTPD = "RATE_LIMIT_TPD"
)

// Limits are a connection's or client key's rate limits as one config
// snapshot sets them, with the gate names their rejections carry.
type Limits struct {
	// Spacing is the dispatch spacing of rpm and minTime, the stricter of
	// the two (0 = none); SpacingGate names it (rpm:<id> or minTime:<id>).
	Spacing     time.Duration
	SpacingGate string
	// RPM, RPD, TPM and TPD are the limits, 0 when unset.
	RPM, RPD, TPM, TPD int64
	// GateRPD, GateTPM and GateTPD name the budgets' gates.
	GateRPD, GateTPM, GateTPD string
	// BudgetDay and BudgetMonth are a client key's money budgets in
	// micro-dollars per UTC day and month (0 = none); GateBudget names
	// their rejections (key-budget:<id>).
	BudgetDay, BudgetMonth int64
	GateBudget             string
}

// ForConnection returns the rate limits of connection id from its
// overrides (a negative value counts as unset), with the gate names of
// their rejections: rpm:<id> or minTime:<id> (whichever sets the spacing),
// rpd:<id>, tpm:<id> and tpd:<id>.
func ForConnection(id string, o limits.Overrides) Limits {
	deref := func(p *int) int {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	deref64 := func(p *int64) int64 {
		if p == nil || *p < 0 {
			return 0
		}
		return *p
	}
	e := limits.Effective{RPM: deref(o.RPM), MinTimeMs: deref(o.MinTimeMs)}
	l := Limits{
		Spacing: e.DispatchSpacing(),
		RPM:     int64(e.RPM),
		RPD:     int64(deref(o.RPD)),
		TPM:     deref64(o.TPM),
		TPD:     deref64(o.TPD),
		GateRPD: "rpd:" + id,
		GateTPM: "tpm:" + id,
		GateTPD: "tpd:" + id,
	}
	l.SpacingGate = "minTime:" + id
	if e.RPM > 0 && time.Minute/time.Duration(e.RPM) >= time.Duration(e.MinTimeMs)*time.Millisecond {
		l.SpacingGate = "rpm:" + id
	}
	return l
}

// ForClientKey returns the rate limits of client key id: rpm as a dispatch
// spacing (gate key-rpm:<id>), tpm (key-tpm:<id>), tpd (key-tpd:<id>) and
// the money budgets (key-budget:<id>). A
// gate name is built only for a limit that is set (it names that limit's
// rejections): a key that is not in the config in force is prepared per
// request.
func ForClientKey(id string, e limits.EffectiveClientKey) Limits {
	l := Limits{
		Spacing: e.DispatchSpacing(),
		RPM:     int64(e.RPM),
		TPM:     max(e.TPM, 0),
		TPD:     max(e.TPD, 0),

		BudgetDay:   max(int64(e.BudgetUSDDaily), 0),
		BudgetMonth: max(int64(e.BudgetUSDMonthly), 0),
	}
	if l.Spends() {
		l.GateBudget = "key-budget:" + id
	}
	if l.Spacing > 0 {
		l.SpacingGate = "key-rpm:" + id
	}
	if l.TPM > 0 {
		l.GateTPM = "key-tpm:" + id
	}
	if l.TPD > 0 {
		l.GateTPD = "key-tpd:" + id
	}
	return l
}

// Any reports whether any rate limit is set.
func (l *Limits) Any() bool {
	return l.Spacing > 0 || l.RPM > 0 || l.RPD > 0 || l.TPM > 0 || l.TPD > 0
}

// Budgeted reports whether a budget can make the connection unavailable.
func (l *Limits) Budgeted() bool { return l.RPD > 0 || l.TPM > 0 || l.TPD > 0 }

// CountsTokens reports whether upstream usage must be read.
func (l *Limits) CountsTokens() bool { return l.TPM > 0 || l.TPD > 0 }

// Spends reports whether a money budget is set.
func (l *Limits) Spends() bool { return l.BudgetDay > 0 || l.BudgetMonth > 0 }

// Block is why a budget keeps a connection or key out, and until when.
type Block struct {
	Code, Gate string
	Until      time.Time
	// Limit names a money budget's limit (budgetUsdDaily, budgetUsdMonthly)
	// in a BUDGET_EXCEEDED block; "" otherwise.
	Limit string
	// Whole says the amount can never fit: it exceeds the budget's whole
	// size.
	Whole bool
	// Err is the store's error of a DispatchFailed.
	Err error
}

// Budget is the budget a token or request block is for, as the live view
// and the metrics name it (rpd, tpd or tpm), and that budget in words for
// a client's error message.
func (b Block) Budget() (name, words string) {
	switch b.Code {
	case CodeRPD:
		return live.BudgetRPD, "requests per day (rpd)"
	case CodeTPD:
		return live.BudgetTPD, "tokens per day (tpd)"
	}
	return live.BudgetTPM, "tokens per minute (tpm)"
}
