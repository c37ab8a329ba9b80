package web

// SettingsFields is the global settings form as typed; form names are the JSON names.
type SettingsFields struct {
	GlobalMaxConcurrent       string // globalMaxConcurrent
	DefaultMaxWaitMs          string // defaultMaxWaitMs
	DefaultExecutionMaxWaitMs string // defaultExecutionMaxWaitMs
	DefaultMaxQueueDepth      string // defaultMaxQueueDepth
	MaxAttempts               string // maxAttempts
	SuspendMs                 string // suspendMs
	BreakerFailures           string // breakerFailures
	BreakerCooldownMs         string // breakerCooldownMs
	PriorityAgingMs           string // priorityAgingMs
	DefaultOutputReserve      string // defaultOutputReserve
	MaxOutputReserve          string // maxOutputReserve
	AffinityTTLMs             string // affinityTtlMs
	MaxAffinityBindings       string // maxAffinityBindings
	AffinityMaxWaitMs         string // affinityMaxWaitMs
	// The runaway guards' defaults: sessionMaxConcurrent, sessionBudgetUsd
	// (dollars), loopLimit, loopWindowMs.
	SessionMaxConcurrent, SessionBudget, LoopLimit, LoopWindowMs string
	// Providers is the per-provider caps textarea (form name "providers"): one
	// "provider maxConcurrent [maxWaitMs]" a line; see limits.ParseProviderCaps.
	Providers string
	// Aliases is the model aliases textarea (form name "aliases"): one
	// alias=model a line; see limits.ParseAliases.
	Aliases string
	// Prices is the prices textarea (form name "prices"): one "pattern input
	// output [cachedInput [cacheWrite]]" a line; see limits.ParsePrices.
	Prices  string
	Version string // version (hidden)
}

// SettingsForm is the settings page's view model.
type SettingsForm struct {
	Fields     SettingsFields
	Errors     FieldErrors
	ReadOnly   bool
	Conflict   *Conflict
	LastChange *Change
	Warnings   []string
}

// SettingsFieldNames returns the settings form's field names in page order.
func SettingsFieldNames() []string {
	return []string{
		"globalMaxConcurrent", "defaultMaxWaitMs", "defaultExecutionMaxWaitMs", "defaultMaxQueueDepth", "priorityAgingMs",
		"defaultOutputReserve", "maxOutputReserve",
		"maxAttempts", "suspendMs", "breakerFailures", "breakerCooldownMs",
		"affinityTtlMs", "maxAffinityBindings", "affinityMaxWaitMs", "providers", "aliases", "prices",
		"sessionMaxConcurrent", "sessionBudgetUsd", "loopLimit", "loopWindowMs",
	}
}

// LineMessage writes any textarea line error in the dashboard's one format:
// LineMessage(l, 2, "glm-5=0", msg); LineErrorMessage uses it for the limits codecs.
func LineMessage(l *Localizer, line int, text, msg string) string {
	return l.T("validation.line", line, text, msg)
}

// defaultPlaceholder is a blank settings field's placeholder, "default 30000": the
// built-in default from limits, never a number of the page's own.
func defaultPlaceholder(l *Localizer, n int) string {
	return l.T("placeholder.default", i64(int64(n)))
}
