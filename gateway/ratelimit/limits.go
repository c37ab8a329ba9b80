package ratelimit

import "time"

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
}

// Any reports whether any rate limit is set.
func (l *Limits) Any() bool {
	return l.Spacing > 0 || l.RPM > 0 || l.RPD > 0 || l.TPM > 0 || l.TPD > 0
}

// Budgeted reports whether a budget can make the connection unavailable.
func (l *Limits) Budgeted() bool { return l.RPD > 0 || l.TPM > 0 || l.TPD > 0 }

// CountsTokens reports whether upstream usage must be read.
func (l *Limits) CountsTokens() bool { return l.TPM > 0 || l.TPD > 0 }

// Block is why a budget keeps a connection or key out, and until when.
type Block struct {
	Code, Gate string
	Until      time.Time
}
