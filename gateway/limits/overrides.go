package limits

import (
	"maps"
)

// Overrides are one connection's rate-limit overrides, as stored in its
// rate_limit_overrides column and shown as "rateLimitOverrides" by the API.
// Every key is optional: a nil pointer (or nil map) is an absent key, which
// is different from an explicit 0, so a stored document marshals back to
// exactly the keys it had. Values are in the documented write ranges once
// they come out of DecodeOverrides or Normalize; the validate tags hold
// those ranges.
type Overrides struct {
	// MaxConcurrent caps the connection's gate; 0 means no cap.
	MaxConcurrent *int `json:"maxConcurrent,omitempty" validate:"omitnil,between=0:10000"`
	// ModelConcurrency caps the gate of each upstream model id (exact
	// match after routing). Keys follow the model-name rule (see
	// ParseModelCaps), caps are 1–10000, at most MaxModelCaps entries (so
	// one connection cannot bloat /metrics and the overview). Never an
	// empty, non-nil map.
	ModelConcurrency map[string]int `json:"modelConcurrency,omitempty" validate:"omitempty,max=500,dive,keys,modelkey,endkeys,cap=1:10000"`
	// MaxWaitMs bounds the wait for admission; 0 or absent uses the
	// provider's maxWaitMs, else the global defaultMaxWaitMs.
	MaxWaitMs *int `json:"maxWaitMs,omitempty" validate:"omitnil,between=0:120000"`
	// ExecutionMaxWaitMs bounds the upstream execution once dispatched
	// (headers and body, streams included); 0 or absent uses the global
	// defaultExecutionMaxWaitMs.
	ExecutionMaxWaitMs *int `json:"executionMaxWaitMs,omitempty" validate:"omitnil,between=0:600000"`
	// MaxQueueDepth bounds the waiters on this connection (all its models
	// together); 0 or absent uses the global defaultMaxQueueDepth.
	MaxQueueDepth *int `json:"maxQueueDepth,omitempty" validate:"omitnil,between=0:100000"`
	// RPM is requests per minute (a spacing of 60000/RPM ms); 0 = none.
	RPM *int `json:"rpm,omitempty" validate:"omitnil,between=0:1000000"`
	// RPD is requests per UTC day; 0 = none.
	RPD *int `json:"rpd,omitempty" validate:"omitnil,between=0:10000000"`
	// TPM is tokens per minute from upstream usage; 0 = none.
	TPM *int64 `json:"tpm,omitempty" validate:"omitnil,between=0:100000000"`
	// TPD is tokens per UTC day from upstream usage; 0 = none. It is an
	// int64 because its range (up to 1e10) does not fit a 32-bit int.
	TPD *int64 `json:"tpd,omitempty" validate:"omitnil,between=0:10000000000"`
	// MinTimeMs is the minimum spacing between dispatches, in
	// milliseconds (JSON "minTime"); 0 = none.
	MinTimeMs *int `json:"minTime,omitempty" validate:"omitnil,between=0:60000"`
	// Adaptive lets the gateway learn an effective cap between 1 and the
	// configured one for the connection gate and each capped model gate
	// (see DESIGN.md "Adaptive and shadow caps"); it needs MaxConcurrent ≥ 1.
	Adaptive *bool `json:"adaptive,omitempty"`
	// Shadow holds caps that are observed, never enforced.
	Shadow *ShadowCaps `json:"shadow,omitempty" validate:"omitnil"`
	// Affinity false opts the connection out of affinity: no session is
	// bound to it, and requests reach it in the usual order (absent = true).
	Affinity *bool `json:"affinity,omitempty"`
	// DrainAtPercent is the usage-window level (1–100, absent =
	// DefaultDrainAtPercent) at or above which the connection takes no new
	// affinity bindings and its bound sessions move on their next turn.
	DrainAtPercent *int `json:"drainAtPercent,omitempty" validate:"omitnil,between=1:100"`
}

// DefaultDrainAtPercent is drainAtPercent when a connection sets none.
const DefaultDrainAtPercent = 95

// AffinityOn reports whether the connection takes part in affinity.
func (o Overrides) AffinityOn() bool { return o.Affinity == nil || *o.Affinity }

// DrainAt is the used fraction (0–1] at which the connection drains.
func (o Overrides) DrainAt() float64 {
	return float64(valueOr(o.DrainAtPercent, DefaultDrainAtPercent)) / 100
}

// OverrideKeys returns the JSON names of every override, in the order of
// DESIGN.md's table (the order the dashboard shows them).
func OverrideKeys() []string {
	return []string{
		KeyMaxConcurrent, KeyModelConcurrency, KeyMaxWaitMs, KeyExecutionMaxWaitMs,
		KeyMaxQueueDepth, KeyRPM, KeyRPD, KeyTPM, KeyTPD, KeyMinTime, KeyAdaptive, KeyShadow,
		KeyAffinity, KeyDrainAtPercent,
	}
}

// The JSON names of the overrides, for forms and Effective.Source.
const (
	KeyMaxConcurrent      = "maxConcurrent"
	KeyModelConcurrency   = "modelConcurrency"
	KeyMaxWaitMs          = "maxWaitMs"
	KeyExecutionMaxWaitMs = "executionMaxWaitMs"
	KeyMaxQueueDepth      = "maxQueueDepth"
	KeyRPM                = "rpm"
	KeyRPD                = "rpd"
	KeyTPM                = "tpm"
	KeyTPD                = "tpd"
	KeyMinTime            = "minTime"
	KeyAdaptive           = "adaptive"
	KeyShadow             = "shadow"
	KeyAffinity           = "affinity"
	KeyDrainAtPercent     = "drainAtPercent"
)

// Clone returns a deep copy of o, so that changing one never changes the other.
func (o Overrides) Clone() Overrides {
	c := Overrides{
		MaxConcurrent:      clonePtr(o.MaxConcurrent),
		MaxWaitMs:          clonePtr(o.MaxWaitMs),
		ExecutionMaxWaitMs: clonePtr(o.ExecutionMaxWaitMs),
		MaxQueueDepth:      clonePtr(o.MaxQueueDepth),
		RPM:                clonePtr(o.RPM),
		RPD:                clonePtr(o.RPD),
		TPM:                clonePtr(o.TPM),
		TPD:                clonePtr(o.TPD),
		MinTimeMs:          clonePtr(o.MinTimeMs),
		Adaptive:           clonePtr(o.Adaptive),
		Affinity:           clonePtr(o.Affinity),
		DrainAtPercent:     clonePtr(o.DrainAtPercent),
	}
	if o.Shadow != nil {
		sh := o.Shadow.Clone()
		c.Shadow = &sh
	}
	if len(o.ModelConcurrency) > 0 {
		c.ModelConcurrency = maps.Clone(o.ModelConcurrency)
	}
	return c
}

// IsZero reports whether o sets no key at all.
func (o Overrides) IsZero() bool {
	return o.MaxConcurrent == nil && len(o.ModelConcurrency) == 0 && o.MaxWaitMs == nil &&
		o.ExecutionMaxWaitMs == nil && o.MaxQueueDepth == nil && o.RPM == nil &&
		o.RPD == nil && o.TPM == nil && o.TPD == nil && o.MinTimeMs == nil &&
		o.Adaptive == nil && (o.Shadow == nil || o.Shadow.IsZero()) && o.Affinity == nil && o.DrainAtPercent == nil
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DecodeOverrides strictly decodes a written overrides document (the value
// of "rateLimitOverrides"). "null" means no overrides; null for one key
// means that key is absent. It rejects what is not a JSON object, unknown or
// repeated keys, values that are not whole numbers (strings, fractions such
// as 1.5 — 1.0 and 1e3 are whole), negatives and values out of range,
// a modelConcurrency that is not an object or has more than MaxModelCaps
// entries, bad model names and caps outside 1–10000. Every problem is reported, each with its path under
// pathPrefix (e.g. "rateLimitOverrides.modelConcurrency.glm-5"), sorted by
// path; on any problem the returned Overrides must not be stored. An empty
// modelConcurrency is normalised to nil.
func DecodeOverrides(data []byte, pathPrefix string) (Overrides, FieldErrors) {
	var o Overrides
	if errs := strictErrors(overrideProblems(decodeDocument(data, &o), &o), pathPrefix); len(errs) > 0 {
		return Overrides{}, errs
	}
	return o, nil
}

// overridesWarningPrefix names stored overrides in Normalize's warnings.
const overridesWarningPrefix = "rateLimitOverrides"

// Normalize reads stored overrides fail-open: it never fails and never
// panics. Whatever is malformed — the whole document (not JSON, not an
// object) or one part of it (unknown key, string, fraction, negative, out of
// range, bad model name or cap) — is dropped, which means "no cap" for that
// part, and named in a warning such as
// "rateLimitOverrides.maxWaitMs: must be a whole number from 0 to 120000 (ignored)".
// The good parts are kept. Empty input and "null" are no overrides, without
// a warning. Warnings are sorted.
func Normalize(raw []byte) (Overrides, []string) {
	o, errs := NormalizeErrors(raw)
	return o, warningLines(errs)
}

// NormalizeErrors is Normalize with each dropped part reported as a
// FieldError (path under "rateLimitOverrides", English message, code and
// arguments) instead of a warning line, for a reader that words the
// warnings itself, such as the dashboard.
func NormalizeErrors(raw []byte) (Overrides, FieldErrors) {
	var o Overrides
	if isBlankOrNull(raw) {
		return o, nil
	}
	problems := overrideProblems(decodeDocument(raw, &o), &o)
	return o, lenientErrors(problems, &o, overridesWarningPrefix)
}

func isBlankOrNull(raw []byte) bool {
	t := trimJSONSpace(raw)
	return len(t) == 0 || string(t) == "null"
}
