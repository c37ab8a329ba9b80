package limits

import (
	"slices"
	"strings"
	"time"
)

// ClientKeyLimits are one client key's own limits, as stored in its limits column
// and shown as "limits" by the API. As with Overrides every key is optional and a
// nil pointer (or nil slice) is an absent key, so a stored document marshals back to
// exactly the keys it had. Values are in the write ranges once they come out of
// DecodeClientKeyLimits or NormalizeClientKeyLimits.
type ClientKeyLimits struct {
	// Weight is the key's share of a saturated gate relative to the other keys
	// waiting there; absent means DefaultWeight.
	Weight *int `json:"weight,omitempty" validate:"omitnil,between=1:1000"`
	// MaxConcurrent caps the gate key:<id> that heads every path of this key;
	// 0 = none.
	MaxConcurrent *int `json:"maxConcurrent,omitempty" validate:"omitnil,between=0:10000"`
	// MaxWaitMs is the key's own bound on the wait for admission; the smaller
	// of it and the connection's applies. 0 = none of its own.
	MaxWaitMs *int `json:"maxWaitMs,omitempty" validate:"omitnil,between=0:120000"`
	// RPM is requests per minute for the key, as a spacing of 60000/RPM ms;
	// 0 = none.
	RPM *int `json:"rpm,omitempty" validate:"omitnil,between=0:1000000"`
	// TPM is tokens per minute for the key, from upstream usage; 0 = none.
	TPM *int64 `json:"tpm,omitempty" validate:"omitnil,between=0:100000000"`
	// TPD is tokens per UTC day for the key, counted in Postgres; 0 = none.
	TPD *int64 `json:"tpd,omitempty" validate:"omitnil,between=0:10000000000"`
	// BudgetUSDDaily and BudgetUSDMonthly are what the key may spend per UTC
	// day and per UTC month at the prices setting, reserved before dispatch
	// like tpd; written as dollars, 0 to MaxBudgetUSD with at most 2
	// decimals. 0 = none.
	BudgetUSDDaily   *Micros `json:"budgetUsdDaily,omitempty" validate:"omitnil,budgetusd"`
	BudgetUSDMonthly *Micros `json:"budgetUsdMonthly,omitempty" validate:"omitnil,budgetusd"`
	// Models are the models the key may use: "provider/model", a bare
	// upstream id, or "provider/*"; absent or empty = all. Never an empty,
	// non-nil slice. A repeated entry is rejected where it repeats.
	Models []string `json:"models,omitempty" validate:"omitempty,max=500,dive,modelpattern"`
	// Priority is the key's class at a saturated gate: "interactive",
	// "standard" or "batch" (PriorityNames); absent means DefaultPriority. A
	// request may lower its own with X-Gatehouse-Priority, never raise it.
	Priority *string `json:"priority,omitempty" validate:"omitnil,oneof=interactive standard batch"`

	// The runaway guards of the key's sessions (DESIGN.md, "Runaway
	// guards"); absent means the settings' default of the same name.
	// SessionMaxConcurrent caps a session's requests in flight (gate
	// session:<session>; 0 = none), SessionBudgetUSD its spend (0 = none),
	// LoopLimit the requests of one session with one fingerprint within
	// LoopWindowMs (0 = loop detection off).
	SessionMaxConcurrent *int    `json:"sessionMaxConcurrent,omitempty" validate:"omitnil,between=0:10000"`
	SessionBudgetUSD     *Micros `json:"sessionBudgetUsd,omitempty" validate:"omitnil,budgetusd"`
	LoopLimit            *int    `json:"loopLimit,omitempty" validate:"omitnil,between=0:10000"`
	LoopWindowMs         *int    `json:"loopWindowMs,omitempty" validate:"omitnil,between=1000:86400000"`
}

// PriorityNames are the priority classes a client key may have, highest
// first (the oneof rule on ClientKeyLimits.Priority says the same; a test
// keeps them, and admission's names, in step).
var PriorityNames = []string{"interactive", "standard", "batch"}

// DefaultPriority is a client key's class when its limits set none.
const DefaultPriority = "standard"

// DefaultWeight is a client key's weight when its limits set none.
const DefaultWeight = 1

// MaxKeyModels is the longest models list a client key may have.
const MaxKeyModels = 500

// The JSON names of the client-key limits that Overrides does not already name
// (maxConcurrent, maxWaitMs, rpm, tpm and tpd are spelt as there).
const (
	KeyWeight   = "weight"
	KeyModels   = "models"
	KeyPriority = "priority"
	// KeyBudgetUSDDaily and KeyBudgetUSDMonthly are the money budgets.
	KeyBudgetUSDDaily   = "budgetUsdDaily"
	KeyBudgetUSDMonthly = "budgetUsdMonthly"
	// The runaway guards (client keys and settings).
	KeySessionMaxConcurrent = "sessionMaxConcurrent"
	KeySessionBudgetUSD     = "sessionBudgetUsd"
	KeyLoopLimit            = "loopLimit"
	KeyLoopWindowMs         = "loopWindowMs"
)

// ClientKeyLimitKeys returns the JSON names of every client-key limit, in the
// order of DESIGN.md's table (the order the dashboard shows them).
func ClientKeyLimitKeys() []string {
	return []string{KeyWeight, KeyMaxConcurrent, KeyMaxWaitMs, KeyRPM, KeyTPM, KeyTPD,
		KeyBudgetUSDDaily, KeyBudgetUSDMonthly, KeyModels, KeyPriority,
		KeySessionMaxConcurrent, KeySessionBudgetUSD, KeyLoopLimit, KeyLoopWindowMs}
}

// clientKeyLimitsPrefix names stored client-key limits in warnings.
const clientKeyLimitsPrefix = "limits"

// DecodeClientKeyLimits strictly decodes a written limits document (the value of
// "limits"), with DecodeOverrides' rules: "null" means no limits, null for one key
// means that key is absent, and every problem is reported with its path under
// pathPrefix (e.g. "limits.weight", "limits.models.3"), sorted; on any problem the
// result must not be stored. An empty models list is normalised to nil.
func DecodeClientKeyLimits(data []byte, pathPrefix string) (ClientKeyLimits, FieldErrors) {
	var l ClientKeyLimits
	if errs := strictErrors(decodeDocument(data, &l), pathPrefix); len(errs) > 0 {
		return ClientKeyLimits{}, errs
	}
	return l, nil
}

// NormalizeClientKeyLimits reads stored limits fail-open, as Normalize reads
// overrides: whatever is malformed is dropped (no limit for that part; a bad models
// entry is left out, a bad models list as a whole means all models) and named in a
// sorted warning line. Empty input and "null" are no limits, without a warning.
func NormalizeClientKeyLimits(raw []byte) (ClientKeyLimits, []string) {
	l, errs := NormalizeClientKeyLimitsErrors(raw)
	return l, warningLines(errs)
}

// NormalizeClientKeyLimitsErrors is NormalizeClientKeyLimits with each dropped
// part reported as a FieldError under "limits", for a reader that words the
// warnings itself.
func NormalizeClientKeyLimitsErrors(raw []byte) (ClientKeyLimits, FieldErrors) {
	var l ClientKeyLimits
	if isBlankOrNull(raw) {
		return l, nil
	}
	problems := decodeDocument(raw, &l)
	return l, lenientErrors(problems, &l, clientKeyLimitsPrefix)
}

// Clone returns a deep copy of l.
func (l ClientKeyLimits) Clone() ClientKeyLimits {
	return ClientKeyLimits{
		Weight:        clonePtr(l.Weight),
		MaxConcurrent: clonePtr(l.MaxConcurrent),
		MaxWaitMs:     clonePtr(l.MaxWaitMs),
		RPM:           clonePtr(l.RPM),
		TPM:           clonePtr(l.TPM),
		TPD:           clonePtr(l.TPD),
		Models:        slices.Clone(l.Models),
		Priority:      clonePtr(l.Priority),

		BudgetUSDDaily:   clonePtr(l.BudgetUSDDaily),
		BudgetUSDMonthly: clonePtr(l.BudgetUSDMonthly),

		SessionMaxConcurrent: clonePtr(l.SessionMaxConcurrent),
		SessionBudgetUSD:     clonePtr(l.SessionBudgetUSD),
		LoopLimit:            clonePtr(l.LoopLimit),
		LoopWindowMs:         clonePtr(l.LoopWindowMs),
	}
}

// IsZero reports whether l sets no key at all.
func (l ClientKeyLimits) IsZero() bool {
	return l.Weight == nil && l.MaxConcurrent == nil && l.MaxWaitMs == nil && l.RPM == nil &&
		l.TPM == nil && l.TPD == nil && len(l.Models) == 0 && l.Priority == nil &&
		l.BudgetUSDDaily == nil && l.BudgetUSDMonthly == nil &&
		l.SessionMaxConcurrent == nil && l.SessionBudgetUSD == nil && l.LoopLimit == nil && l.LoopWindowMs == nil
}

// Effective returns l with absent keys filled in: weight DefaultWeight, 0 (none)
// for the others.
func (l ClientKeyLimits) Effective() EffectiveClientKey {
	return EffectiveClientKey{
		Weight:        valueOr(l.Weight, DefaultWeight),
		MaxConcurrent: valueOr(l.MaxConcurrent, 0),
		MaxWaitMs:     valueOr(l.MaxWaitMs, 0),
		RPM:           valueOr(l.RPM, 0),
		TPM:           valueOr(l.TPM, 0),
		TPD:           valueOr(l.TPD, 0),
		Models:        NewModelAllowlist(l.Models),
		Priority:      valueOr(l.Priority, DefaultPriority),

		BudgetUSDDaily:   max(valueOr(l.BudgetUSDDaily, 0), 0),
		BudgetUSDMonthly: max(valueOr(l.BudgetUSDMonthly, 0), 0),
	}
}

// EffectiveClientKey holds the limits the gateway applies to one client key, every
// absent key filled in. 0 means none for MaxConcurrent, MaxWaitMs, RPM, TPM and TPD.
type EffectiveClientKey struct {
	Weight        int
	MaxConcurrent int
	MaxWaitMs     int
	RPM           int
	TPM, TPD      int64
	// Models says which models the key may use (the zero value allows all).
	Models ModelAllowlist
	// Priority is the key's class, one of PriorityNames.
	Priority string
	// BudgetUSDDaily and BudgetUSDMonthly are the money budgets (0 = none).
	BudgetUSDDaily, BudgetUSDMonthly Micros
}

// MaxWait is MaxWaitMs as a duration (0 = no bound of the key's own).
func (e EffectiveClientKey) MaxWait() time.Duration { return ms(e.MaxWaitMs) }

// DispatchSpacing is the least time between two dispatches of the key's requests
// (60000/RPM ms, rounded up), or 0 when it has no rpm.
func (e EffectiveClientKey) DispatchSpacing() time.Duration {
	if e.RPM <= 0 {
		return 0
	}
	return (time.Minute + time.Duration(e.RPM) - 1) / time.Duration(e.RPM)
}

// ModelAllowlist is a client key's models list made ready for lookups. Its zero
// value allows every model.
type ModelAllowlist struct {
	bare      map[string]bool            // every entry as a bare upstream id
	qualified map[string]map[string]bool // "p/m" entries: p → m
	providers map[string]bool            // the p of "p/*"
}

// NewModelAllowlist builds the allowlist of entries (valid ones, as
// DecodeClientKeyLimits leaves them); no entries allow every model. An entry
// "a/b" is read both as provider a's model b and as the bare id "a/b", since
// upstream ids may hold slashes.
func NewModelAllowlist(entries []string) ModelAllowlist {
	if len(entries) == 0 {
		return ModelAllowlist{}
	}
	a := ModelAllowlist{bare: make(map[string]bool, len(entries)),
		qualified: map[string]map[string]bool{}, providers: map[string]bool{}}
	for _, e := range entries {
		if p, ok := strings.CutSuffix(e, "/*"); ok {
			a.providers[p] = true
			continue
		}
		a.bare[e] = true
		if p, m, ok := strings.Cut(e, "/"); ok {
			if a.qualified[p] == nil {
				a.qualified[p] = map[string]bool{}
			}
			a.qualified[p][m] = true
		}
	}
	return a
}

// All reports whether the allowlist allows every model.
func (a ModelAllowlist) All() bool { return a.bare == nil && a.providers == nil }

// Allows reports whether a request may reach upstream model id on a connection of
// provider: the list holds "provider/id", the bare "id", or "provider/*".
func (a ModelAllowlist) Allows(provider, id string) bool {
	return a.All() || a.bare[id] || a.providers[provider] || a.qualified[provider][id]
}

// validModelPattern reports whether s may be a models entry: a model name (see
// validModelKey) with '*' only as the whole model part of "provider/*", whose
// provider follows the provider rule.
func validModelPattern(s string) bool {
	if !validModelKey(s) {
		return false
	}
	if p, ok := strings.CutSuffix(s, "/*"); ok {
		return validProviderKey(p)
	}
	return !strings.Contains(s, "*")
}
