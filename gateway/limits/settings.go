package limits

import (
	"maps"
	"time"
)

// Settings is the global settings row: gates and defaults for every
// connection. As with Overrides, a nil pointer is an absent key, which
// means the built-in default (see DefaultSettings); Effective fills them in.
//
// Write ranges (decided here; DESIGN.md gives only the defaults):
//
//	globalMaxConcurrent        0–100000     default 0 (off)
//	defaultMaxWaitMs           1–120000     default 30000 (1 ms ≈ fail fast; no "wait forever")
//	defaultExecutionMaxWaitMs  1–600000     default 600000
//	defaultMaxQueueDepth       0–100000     default 0 (unbounded)
//	maxAttempts                1–10         default 3
//	suspendMs                  0–86400000   default 1800000 (0 = never suspend after 401/403)
//	breakerFailures            0–100        default 5 (0 = breaker off)
//	breakerCooldownMs          1000–3600000 default 30000
//	priorityAgingMs            100–3600000  default 10000 (a waiter moves up one priority class per period)
//	defaultOutputReserve       1–1000000    default 4096 (tokens a budget reservation
//	                           assumes for the answer of a request that sets no
//	                           output bound)
//	maxOutputReserve           1–10000000   default 65536 (the most output tokens a
//	                           reservation assumes, the request's n included)
//	affinityTtlMs              1000–86400000 default 300000 (a session idle this
//	                           long is forgotten: its affinity binding — the
//	                           providers' default prompt-cache lifetime — and
//	                           the hold of a runaway guard)
//	maxAffinityBindings        1–1000000    default 100000 (least recently used dropped)
//	affinityMaxWaitMs          0–120000     default 2000 (how long a request waits at
//	                           its bound connection before the usual order)
//	providers.<p>              p matches [a-z0-9-]{1,32}
//	providers.<p>.maxConcurrent 0–100000    0 or absent = no provider cap
//	providers.<p>.maxWaitMs     0–120000    0 or absent = defaultMaxWaitMs
//	aliases                    at most 500 entries; alias and target are model
//	                           names (see validModelKey); a target may not be
//	                           an alias (see ParseAliases)
//	prices                     ≤ 500 model patterns (see Prices)
//	sessionMaxConcurrent       0–10000      default 0 (none)
//	sessionBudgetUsd           0–1000000, 2 decimals, default 0 (none)
//	loopLimit                  0–10000      default 0 (loop detection off)
//	loopWindowMs               1000–86400000 default 600000
//	alerts                     at most 20 webhooks (see AlertWebhook)
//	alertCooldownMs            1000–86400000 default 900000
type Settings struct {
	GlobalMaxConcurrent       *int                        `json:"globalMaxConcurrent,omitempty" validate:"omitnil,between=0:100000"`
	DefaultMaxWaitMs          *int                        `json:"defaultMaxWaitMs,omitempty" validate:"omitnil,between=1:120000"`
	DefaultExecutionMaxWaitMs *int                        `json:"defaultExecutionMaxWaitMs,omitempty" validate:"omitnil,between=1:600000"`
	DefaultMaxQueueDepth      *int                        `json:"defaultMaxQueueDepth,omitempty" validate:"omitnil,between=0:100000"`
	MaxAttempts               *int                        `json:"maxAttempts,omitempty" validate:"omitnil,between=1:10"`
	SuspendMs                 *int                        `json:"suspendMs,omitempty" validate:"omitnil,between=0:86400000"`
	BreakerFailures           *int                        `json:"breakerFailures,omitempty" validate:"omitnil,between=0:100"`
	BreakerCooldownMs         *int                        `json:"breakerCooldownMs,omitempty" validate:"omitnil,between=1000:3600000"`
	PriorityAgingMs           *int                        `json:"priorityAgingMs,omitempty" validate:"omitnil,between=100:3600000"`
	DefaultOutputReserve      *int                        `json:"defaultOutputReserve,omitempty" validate:"omitnil,between=1:1000000"`
	MaxOutputReserve          *int                        `json:"maxOutputReserve,omitempty" validate:"omitnil,between=1:10000000"`
	AffinityTTLMs             *int                        `json:"affinityTtlMs,omitempty" validate:"omitnil,between=1000:86400000"`
	MaxAffinityBindings       *int                        `json:"maxAffinityBindings,omitempty" validate:"omitnil,between=1:1000000"`
	AffinityMaxWaitMs         *int                        `json:"affinityMaxWaitMs,omitempty" validate:"omitnil,between=0:120000"`
	Providers                 map[string]ProviderSettings `json:"providers,omitempty" validate:"omitempty,dive,keys,providerkey,endkeys"`
	Aliases                   map[string]string           `json:"aliases,omitempty" validate:"omitempty,max=500,dive,keys,modelkey,endkeys,modelkey"`
	Prices                    Prices                      `json:"prices,omitempty" validate:"omitempty,max=500,dive,keys,modelpattern,endkeys"`
	// The runaway guards' defaults for client keys that set none (as
	// ClientKeyLimits).
	SessionMaxConcurrent *int    `json:"sessionMaxConcurrent,omitempty" validate:"omitnil,between=0:10000"`
	SessionBudgetUSD     *Micros `json:"sessionBudgetUsd,omitempty" validate:"omitnil,budgetusd"`
	LoopLimit            *int    `json:"loopLimit,omitempty" validate:"omitnil,between=0:10000"`
	LoopWindowMs         *int    `json:"loopWindowMs,omitempty" validate:"omitnil,between=1000:86400000"`
	// Alerts are the webhooks alerts go to; AlertCooldownMs spaces the
	// alerts of one condition (see alerts.go).
	Alerts          AlertWebhooks `json:"alerts,omitempty" validate:"-"`
	AlertCooldownMs *int          `json:"alertCooldownMs,omitempty" validate:"omitnil,between=1000:86400000"`
}

// ProviderSettings are the gate settings of one provider (all of its
// connections together). 0 or absent means off.
type ProviderSettings struct {
	// MaxConcurrent caps the provider's gate; 0 = no cap.
	MaxConcurrent *int `json:"maxConcurrent,omitempty" validate:"omitnil,between=0:100000"`
	// MaxWaitMs is the admission wait for the provider's connections that
	// set none; 0 = use defaultMaxWaitMs.
	MaxWaitMs *int `json:"maxWaitMs,omitempty" validate:"omitnil,between=0:120000"`
}

// Built-in defaults for absent settings keys.
const (
	DefaultGlobalMaxConcurrent = 0
	DefaultMaxWaitMs           = 30000
	DefaultExecutionMaxWaitMs  = 600000
	DefaultMaxQueueDepth       = 0
	DefaultMaxAttempts         = 3
	DefaultSuspendMs           = 1800000
	DefaultBreakerFailures     = 5
	DefaultBreakerCooldownMs   = 30000
	DefaultPriorityAgingMs     = 10000
	DefaultOutputReserve       = 4096
	DefaultMaxOutputReserve    = 65536
	DefaultAffinityTTLMs       = 300000
	DefaultMaxAffinityBindings = 100000
	DefaultAffinityMaxWaitMs   = 2000
	DefaultLoopWindowMs        = 600000
	DefaultAlertCooldownMs     = 900000
)

// settingsWarningPrefix names the settings row in NormalizeSettings' warnings.
const settingsWarningPrefix = "settings"

// DefaultSettings returns settings with every scalar key set to its built-in
// default and no providers: what a fresh installation stores.
func DefaultSettings() Settings {
	return Settings{
		GlobalMaxConcurrent:       new(DefaultGlobalMaxConcurrent),
		DefaultMaxWaitMs:          new(DefaultMaxWaitMs),
		DefaultExecutionMaxWaitMs: new(DefaultExecutionMaxWaitMs),
		DefaultMaxQueueDepth:      new(DefaultMaxQueueDepth),
		MaxAttempts:               new(DefaultMaxAttempts),
		SuspendMs:                 new(DefaultSuspendMs),
		BreakerFailures:           new(DefaultBreakerFailures),
		BreakerCooldownMs:         new(DefaultBreakerCooldownMs),
		PriorityAgingMs:           new(DefaultPriorityAgingMs),
		DefaultOutputReserve:      new(DefaultOutputReserve),
		MaxOutputReserve:          new(DefaultMaxOutputReserve),
		AffinityTTLMs:             new(DefaultAffinityTTLMs),
		MaxAffinityBindings:       new(DefaultMaxAffinityBindings),
		AffinityMaxWaitMs:         new(DefaultAffinityMaxWaitMs),
		SessionMaxConcurrent:      new(0),
		SessionBudgetUSD:          new(Micros(0)),
		LoopLimit:                 new(0),
		LoopWindowMs:              new(DefaultLoopWindowMs),
		AlertCooldownMs:           new(DefaultAlertCooldownMs),
	}
}

// EffectiveSettings are Settings with every default filled in: plain values
// for the gateway to use.
type EffectiveSettings struct {
	GlobalMaxConcurrent       int // 0 = off
	DefaultMaxWaitMs          int
	DefaultExecutionMaxWaitMs int
	DefaultMaxQueueDepth      int // 0 = unbounded
	MaxAttempts               int
	SuspendMs                 int // 0 = never suspend
	BreakerFailures           int // 0 = breaker off
	BreakerCooldownMs         int
	PriorityAgingMs           int
	// DefaultOutputReserve is the output tokens a budget reservation
	// assumes for a request that sets no output bound.
	DefaultOutputReserve int
	// MaxOutputReserve caps the output tokens a budget reservation
	// assumes, whatever the request's bound (times its n); a larger actual
	// usage is charged when known.
	MaxOutputReserve int
	// AffinityTTLMs, MaxAffinityBindings and AffinityMaxWaitMs govern the
	// affinity bindings (package session).
	AffinityTTLMs       int
	MaxAffinityBindings int
	AffinityMaxWaitMs   int
	// Providers holds every provider that sets something; a provider not
	// listed has no cap and no wait of its own.
	Providers map[string]EffectiveProvider
	// Aliases maps a client's model name to the model it stands for
	// (provider/model or a bare id); nil when none.
	Aliases map[string]string
	// Prices are the prices per model pattern (none: every model costs 0).
	Prices Prices
	// The Session* and Loop* fields are the runaway guards' defaults for
	// keys that set none (0 = none, loop detection off); a session idle for
	// AffinityTTLMs is forgotten.
	SessionMaxConcurrent int
	SessionBudgetUSD     Micros
	LoopLimit            int
	LoopWindowMs         int
	// Alerts are the alert webhooks (nil: none); AlertCooldownMs spaces
	// the alerts of one condition.
	Alerts          AlertWebhooks
	AlertCooldownMs int
}

// EffectiveProvider is a provider's settings with absent keys as 0 (off).
type EffectiveProvider struct {
	MaxConcurrent int // 0 = no cap
	MaxWaitMs     int // 0 = use DefaultMaxWaitMs
}

// Effective returns s with the built-in default for every absent key.
func (s Settings) Effective() EffectiveSettings {
	e := EffectiveSettings{
		GlobalMaxConcurrent:       valueOr(s.GlobalMaxConcurrent, DefaultGlobalMaxConcurrent),
		DefaultMaxWaitMs:          valueOr(s.DefaultMaxWaitMs, DefaultMaxWaitMs),
		DefaultExecutionMaxWaitMs: valueOr(s.DefaultExecutionMaxWaitMs, DefaultExecutionMaxWaitMs),
		DefaultMaxQueueDepth:      valueOr(s.DefaultMaxQueueDepth, DefaultMaxQueueDepth),
		MaxAttempts:               valueOr(s.MaxAttempts, DefaultMaxAttempts),
		SuspendMs:                 valueOr(s.SuspendMs, DefaultSuspendMs),
		BreakerFailures:           valueOr(s.BreakerFailures, DefaultBreakerFailures),
		BreakerCooldownMs:         valueOr(s.BreakerCooldownMs, DefaultBreakerCooldownMs),
		Prices:                    clonePrices(s.Prices),
		PriorityAgingMs:           valueOr(s.PriorityAgingMs, DefaultPriorityAgingMs),
		DefaultOutputReserve:      valueOr(s.DefaultOutputReserve, DefaultOutputReserve),
		MaxOutputReserve:          valueOr(s.MaxOutputReserve, DefaultMaxOutputReserve),
		AffinityTTLMs:             valueOr(s.AffinityTTLMs, DefaultAffinityTTLMs),
		MaxAffinityBindings:       valueOr(s.MaxAffinityBindings, DefaultMaxAffinityBindings),
		AffinityMaxWaitMs:         valueOr(s.AffinityMaxWaitMs, DefaultAffinityMaxWaitMs),
		SessionMaxConcurrent:      valueOr(s.SessionMaxConcurrent, 0),
		SessionBudgetUSD:          max(valueOr(s.SessionBudgetUSD, 0), 0),
		LoopLimit:                 valueOr(s.LoopLimit, 0),
		LoopWindowMs:              valueOr(s.LoopWindowMs, DefaultLoopWindowMs),
		Alerts:                    s.Alerts.Clone(),
		AlertCooldownMs:           valueOr(s.AlertCooldownMs, DefaultAlertCooldownMs),
	}
	if len(s.Providers) > 0 {
		e.Providers = make(map[string]EffectiveProvider, len(s.Providers))
		for name, p := range s.Providers {
			e.Providers[name] = EffectiveProvider{
				MaxConcurrent: valueOr(p.MaxConcurrent, 0),
				MaxWaitMs:     valueOr(p.MaxWaitMs, 0),
			}
		}
	}
	e.Aliases = maps.Clone(s.Aliases)
	return e
}

// WithDefaults returns a copy of s in which every absent scalar key holds
// its built-in default (providers are copied as they are).
func (s Settings) WithDefaults() Settings {
	d := DefaultSettings()
	out := Settings{
		GlobalMaxConcurrent:       ptrOr(s.GlobalMaxConcurrent, d.GlobalMaxConcurrent),
		DefaultMaxWaitMs:          ptrOr(s.DefaultMaxWaitMs, d.DefaultMaxWaitMs),
		DefaultExecutionMaxWaitMs: ptrOr(s.DefaultExecutionMaxWaitMs, d.DefaultExecutionMaxWaitMs),
		DefaultMaxQueueDepth:      ptrOr(s.DefaultMaxQueueDepth, d.DefaultMaxQueueDepth),
		MaxAttempts:               ptrOr(s.MaxAttempts, d.MaxAttempts),
		SuspendMs:                 ptrOr(s.SuspendMs, d.SuspendMs),
		BreakerFailures:           ptrOr(s.BreakerFailures, d.BreakerFailures),
		BreakerCooldownMs:         ptrOr(s.BreakerCooldownMs, d.BreakerCooldownMs),
		Prices:                    clonePrices(s.Prices),
		PriorityAgingMs:           ptrOr(s.PriorityAgingMs, d.PriorityAgingMs),
		DefaultOutputReserve:      ptrOr(s.DefaultOutputReserve, d.DefaultOutputReserve),
		MaxOutputReserve:          ptrOr(s.MaxOutputReserve, d.MaxOutputReserve),
		AffinityTTLMs:             ptrOr(s.AffinityTTLMs, d.AffinityTTLMs),
		MaxAffinityBindings:       ptrOr(s.MaxAffinityBindings, d.MaxAffinityBindings),
		AffinityMaxWaitMs:         ptrOr(s.AffinityMaxWaitMs, d.AffinityMaxWaitMs),
		SessionMaxConcurrent:      ptrOr(s.SessionMaxConcurrent, d.SessionMaxConcurrent),
		SessionBudgetUSD:          ptrOr(s.SessionBudgetUSD, d.SessionBudgetUSD),
		LoopLimit:                 ptrOr(s.LoopLimit, d.LoopLimit),
		LoopWindowMs:              ptrOr(s.LoopWindowMs, d.LoopWindowMs),
		Alerts:                    s.Alerts.Clone(),
		AlertCooldownMs:           ptrOr(s.AlertCooldownMs, d.AlertCooldownMs),
	}
	if len(s.Providers) > 0 {
		out.Providers = make(map[string]ProviderSettings, len(s.Providers))
		for name, p := range s.Providers {
			out.Providers[name] = ProviderSettings{MaxConcurrent: clonePtr(p.MaxConcurrent), MaxWaitMs: clonePtr(p.MaxWaitMs)}
		}
	}
	out.Aliases = maps.Clone(s.Aliases)
	return out
}

// SuspendDuration is SuspendMs as a duration.
func (e EffectiveSettings) SuspendDuration() time.Duration { return ms(e.SuspendMs) }

// BreakerCooldown is BreakerCooldownMs as a duration.
func (e EffectiveSettings) BreakerCooldown() time.Duration { return ms(e.BreakerCooldownMs) }

// PriorityAging is PriorityAgingMs as a duration.
func (e EffectiveSettings) PriorityAging() time.Duration { return ms(e.PriorityAgingMs) }

// AffinityTTL is AffinityTTLMs as a duration.
func (e EffectiveSettings) AffinityTTL() time.Duration { return ms(e.AffinityTTLMs) }

// AffinityMaxWait is AffinityMaxWaitMs as a duration.
func (e EffectiveSettings) AffinityMaxWait() time.Duration { return ms(e.AffinityMaxWaitMs) }

// DefaultMaxWait is DefaultMaxWaitMs as a duration.
func (e EffectiveSettings) DefaultMaxWait() time.Duration { return ms(e.DefaultMaxWaitMs) }

// DefaultExecutionMaxWait is DefaultExecutionMaxWaitMs as a duration.
func (e EffectiveSettings) DefaultExecutionMaxWait() time.Duration {
	return ms(e.DefaultExecutionMaxWaitMs)
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func ptrOr[T any](p, def *T) *T {
	if p == nil {
		return def
	}
	return clonePtr(p)
}

// DecodeSettings strictly decodes a written settings document with the same
// rules as DecodeOverrides (whole numbers only, unknown keys rejected, every
// problem reported with its path under pathPrefix, sorted), plus the ranges
// listed on Settings, provider keys matching [a-z0-9-]{1,32} and no alias
// naming an alias (reported at aliases.<name>). "null" means
// no settings (every key at its default). Provider entries that set nothing
// are dropped.
func DecodeSettings(data []byte, pathPrefix string) (Settings, FieldErrors) {
	var s Settings
	if errs := strictErrors(aliasProblems(decodeDocument(data, &s), &s), pathPrefix); len(errs) > 0 {
		return Settings{}, errs
	}
	return s, nil
}

// NormalizeSettings reads the stored settings row fail-open, like Normalize:
// a malformed part is dropped (so its default applies) and named in a
// warning such as "settings.maxAttempts: must be a whole number from 1 to 10
// (ignored)"; it never fails and never panics.
func NormalizeSettings(raw []byte) (Settings, []string) {
	s, errs := NormalizeSettingsErrors(raw)
	return s, warningLines(errs)
}

// NormalizeSettingsErrors is NormalizeSettings with each dropped part
// reported as a FieldError (path under "settings") instead of a warning line.
func NormalizeSettingsErrors(raw []byte) (Settings, FieldErrors) {
	var s Settings
	if isBlankOrNull(raw) {
		return s, nil
	}
	problems := aliasProblems(decodeDocument(raw, &s), &s)
	return s, lenientErrors(problems, &s, settingsWarningPrefix)
}

// Bounds are what a connection's requests wait and run under: the wait for
// admission, the queue depth of its gate (0 unbounded) and the execution
// bound.
type Bounds struct {
	MaxWait       time.Duration
	MaxQueueDepth int
	Execution     time.Duration
}

// Bounds resolves the bounds of a connection of provider with overrides o:
// the connection's value when it sets one above 0, else the provider's
// (maxWaitMs only), else the settings', else the built-in default (the
// execution bound never ends up 0).
func (e EffectiveSettings) Bounds(provider string, o Overrides) Bounds {
	b := Bounds{MaxWait: positiveMs(o.MaxWaitMs), MaxQueueDepth: e.DefaultMaxQueueDepth, Execution: positiveMs(o.ExecutionMaxWaitMs)}
	if b.MaxWait == 0 {
		b.MaxWait = ms(e.Providers[provider].MaxWaitMs)
	}
	if b.MaxWait == 0 {
		b.MaxWait = e.DefaultMaxWait()
	}
	if o.MaxQueueDepth != nil && *o.MaxQueueDepth > 0 {
		b.MaxQueueDepth = *o.MaxQueueDepth
	}
	if b.Execution == 0 {
		b.Execution = e.DefaultExecutionMaxWait()
	}
	if b.Execution <= 0 {
		b.Execution = ms(DefaultExecutionMaxWaitMs)
	}
	return b
}

// positiveMs is an optional millisecond value as a duration, 0 when absent
// or not above 0.
func positiveMs(p *int) time.Duration {
	if p == nil || *p <= 0 {
		return 0
	}
	return ms(*p)
}
