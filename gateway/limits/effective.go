package limits

import (
	"maps"
	"time"
)

// Source says where an effective value comes from.
type Source string

// The sources of an effective value, most specific first.
const (
	SourceConnection Source = "connection" // the connection's own override
	SourceProvider   Source = "provider"   // settings.providers.<provider>
	SourceSettings   Source = "settings"   // a key set in the settings row
	SourceDefault    Source = "default"    // the built-in default
)

// Origin is a value together with where it comes from.
type Origin struct {
	Value  int64
	Source Source
}

// Effective holds the limits the gateway applies to one connection: its
// overrides, with the provider's and global defaults filled in where it
// sets none. 0 means "no cap"/"none" for MaxConcurrent, MaxQueueDepth
// (unbounded), RPM, RPD, TPM, TPD and MinTimeMs.
type Effective struct {
	MaxConcurrent      int
	ModelConcurrency   map[string]int // nil when no model is capped
	MaxWaitMs          int
	ExecutionMaxWaitMs int
	MaxQueueDepth      int
	RPM, RPD           int
	TPM, TPD           int64
	MinTimeMs          int

	sources   [numKeys]Source
	fallbacks [numKeys]Origin
}

const (
	idxMaxConcurrent = iota
	idxModelConcurrency
	idxMaxWaitMs
	idxExecutionMaxWaitMs
	idxMaxQueueDepth
	idxRPM
	idxRPD
	idxTPM
	idxTPD
	idxMinTime
	numKeys
)

func keyIndex(key string) (int, bool) {
	switch key {
	case KeyMaxConcurrent:
		return idxMaxConcurrent, true
	case KeyModelConcurrency:
		return idxModelConcurrency, true
	case KeyMaxWaitMs:
		return idxMaxWaitMs, true
	case KeyExecutionMaxWaitMs:
		return idxExecutionMaxWaitMs, true
	case KeyMaxQueueDepth:
		return idxMaxQueueDepth, true
	case KeyRPM:
		return idxRPM, true
	case KeyRPD:
		return idxRPD, true
	case KeyTPM:
		return idxTPM, true
	case KeyTPD:
		return idxTPD, true
	case KeyMinTime:
		return idxMinTime, true
	}
	return 0, false
}

// Resolve returns the limits for a connection of the given provider with
// overrides o. The precedence is the connection's value, then the
// provider's (only maxWaitMs has one), then the settings row, then the
// built-in default. For maxWaitMs, executionMaxWaitMs and maxQueueDepth a
// connection's 0 means "use the default"; for the other keys a 0 is the
// connection's own value ("no cap"/"none"). o is assumed valid (as
// DecodeOverrides or Normalize return it).
func Resolve(s Settings, provider string, o Overrides) Effective {
	var e Effective
	none := Origin{Value: 0, Source: SourceDefault}
	for i := range e.fallbacks {
		e.fallbacks[i] = none
	}
	e.fallbacks[idxMaxWaitMs] = settingOrigin(s.DefaultMaxWaitMs, DefaultMaxWaitMs)
	if p, ok := s.Providers[provider]; ok && p.MaxWaitMs != nil && *p.MaxWaitMs > 0 {
		e.fallbacks[idxMaxWaitMs] = Origin{Value: int64(*p.MaxWaitMs), Source: SourceProvider}
	}
	e.fallbacks[idxExecutionMaxWaitMs] = settingOrigin(s.DefaultExecutionMaxWaitMs, DefaultExecutionMaxWaitMs)
	e.fallbacks[idxMaxQueueDepth] = settingOrigin(s.DefaultMaxQueueDepth, DefaultMaxQueueDepth)

	// pick returns the connection's value when it counts, else the fallback.
	pick := func(i int, v *int64, zeroInherits bool) int64 {
		if v != nil && (*v != 0 || !zeroInherits) {
			e.sources[i] = SourceConnection
			return *v
		}
		e.sources[i] = e.fallbacks[i].Source
		return e.fallbacks[i].Value
	}
	e.MaxConcurrent = int(pick(idxMaxConcurrent, widen(o.MaxConcurrent), false))
	e.MaxWaitMs = int(pick(idxMaxWaitMs, widen(o.MaxWaitMs), true))
	e.ExecutionMaxWaitMs = int(pick(idxExecutionMaxWaitMs, widen(o.ExecutionMaxWaitMs), true))
	e.MaxQueueDepth = int(pick(idxMaxQueueDepth, widen(o.MaxQueueDepth), true))
	e.RPM = int(pick(idxRPM, widen(o.RPM), false))
	e.RPD = int(pick(idxRPD, widen(o.RPD), false))
	e.TPM = pick(idxTPM, o.TPM, false)
	e.TPD = pick(idxTPD, o.TPD, false)
	e.MinTimeMs = int(pick(idxMinTime, widen(o.MinTimeMs), false))
	e.sources[idxModelConcurrency] = SourceDefault
	if len(o.ModelConcurrency) > 0 {
		e.ModelConcurrency = maps.Clone(o.ModelConcurrency)
		e.sources[idxModelConcurrency] = SourceConnection
	}
	return e
}

func settingOrigin(p *int, def int) Origin {
	if p != nil {
		return Origin{Value: int64(*p), Source: SourceSettings}
	}
	return Origin{Value: int64(def), Source: SourceDefault}
}

func widen(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

// Source reports where the effective value of the override key (a JSON
// name such as "maxWaitMs") comes from. An unknown key reports "".
func (e Effective) Source(key string) Source {
	i, ok := keyIndex(key)
	if !ok {
		return ""
	}
	return e.sources[i]
}

// Fallback reports the value key would take if the connection left it
// blank, and where that value comes from — what the dashboard shows as the
// placeholder of an empty field ("default 30000", "provider: 20000"). For
// keys without a default it is 0 ("none") from SourceDefault; for
// modelConcurrency it is always that (no model is capped by default). An
// unknown key reports the zero Origin.
func (e Effective) Fallback(key string) Origin {
	i, ok := keyIndex(key)
	if !ok {
		return Origin{}
	}
	return e.fallbacks[i]
}

// MaxWait is MaxWaitMs as a duration.
func (e Effective) MaxWait() time.Duration { return ms(e.MaxWaitMs) }

// ExecutionMaxWait is ExecutionMaxWaitMs as a duration.
func (e Effective) ExecutionMaxWait() time.Duration { return ms(e.ExecutionMaxWaitMs) }

// DispatchSpacing is the minimum time between two dispatches on the
// connection: the stricter of MinTimeMs and the spacing RPM implies
// (one dispatch every minute/RPM, no burst). 0 means no spacing.
func (e Effective) DispatchSpacing() time.Duration {
	d := ms(e.MinTimeMs)
	if e.RPM > 0 {
		d = max(d, time.Minute/time.Duration(e.RPM))
	}
	return d
}

// ModelCap returns the cap of the given upstream model id, 0 when it has none.
func (e Effective) ModelCap(model string) int { return e.ModelConcurrency[model] }
