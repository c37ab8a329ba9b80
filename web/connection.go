package web

import (
	"net/url"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// ConnectionRow is one line of the connections list.
type ConnectionRow struct {
	ID       string
	Name     string
	Provider string
	APIStyle string // "openai", "anthropic" or "gemini"
	Models   []string
	// MaxConcurrent and ModelCaps summarise the caps ("4 · glm-4.7=3 glm-5=1"); 0/nil = none.
	MaxConcurrent int
	ModelCaps     map[string]int
	Enabled       bool
	Health        string // a Health* constant; "" = not known
	// InFlight and Queued are the live load on the connection (all its gates' waiters).
	InFlight int
	Queued   int
}

// ConnectionList is the connections page's view model.
type ConnectionList struct {
	Items []ConnectionRow
	// LiveURL is the JSON endpoint static/app.js polls to keep the in-flight and
	// queued columns current ("/live"); "" turns live refresh off.
	LiveURL string
	// LiveIntervalMs is the poll interval.
	LiveIntervalMs int
}

// ConnectionFields is what a connection form holds, as typed: every value is the raw
// text of its input (the handler parses and validates), so a failed save re-renders
// exactly what was typed. Form names are the JSON names (see the field tags).
type ConnectionFields struct {
	Name               string // name
	Provider           string // provider
	APIStyle           string // apiStyle: "openai", "anthropic" or "gemini"
	BaseURL            string // baseUrl
	APIKey             string // apiKey: never filled from storage; blank on edit keeps the key
	Priority           string // priority
	Models             string // models: one upstream id a line
	Enabled            bool   // enabled
	MaxConcurrent      string // maxConcurrent
	ModelConcurrency   string // modelConcurrency: "model=cap" a line (limits text codec)
	MaxWaitMs          string // maxWaitMs
	ExecutionMaxWaitMs string // executionMaxWaitMs
	MaxQueueDepth      string // maxQueueDepth
	RPM                string // rpm
	RPD                string // rpd
	TPM                string // tpm
	TPD                string // tpd
	MinTime            string // minTime
	// Adaptive is the "adaptive" checkbox (drawn after a hidden "false", so an
	// unchecked box is told from a form that predates it).
	Adaptive bool
	// ShadowMaxConcurrent and ShadowModelConcurrency are the shadow caps, form
	// names "shadow.maxConcurrent" and "shadow.modelConcurrency" (the JSON path
	// below rateLimitOverrides); the textarea uses the model=cap codec.
	ShadowMaxConcurrent    string
	ShadowModelConcurrency string
	// AffinityOff is the "affinity" checkbox unticked (it is ticked by
	// default; unticked stores affinity false); DrainAtPercent is
	// drainAtPercent.
	AffinityOff    bool
	DrainAtPercent string
	Version        string // version (hidden): the version the form was loaded at
}

// advancedFields returns the form names inside the Advanced section.
func advancedFields() []string {
	return []string{
		"maxWaitMs", "executionMaxWaitMs", "maxQueueDepth", "rpm", "rpd", "tpm", "tpd", "minTime",
		"adaptive", "shadow.maxConcurrent", "shadow.modelConcurrency", "affinity", "drainAtPercent",
	}
}

// ConnectionFieldNames returns the form names of the connection form in page order
// (the JSON names, plus the hidden "version"); errors under any other name are shown
// at the top of the form.
func ConnectionFieldNames() []string {
	return append([]string{
		"name", "provider", "apiStyle", "baseUrl", "apiKey", "priority", "models", "enabled",
		"maxConcurrent", "modelConcurrency",
	}, advancedFields()...)
}

// advanced returns the value of each Advanced field, in advancedFields order.
func (f ConnectionFields) advanced() []string {
	adaptive := ""
	if f.Adaptive {
		adaptive = "true"
	}
	return []string{
		f.MaxWaitMs, f.ExecutionMaxWaitMs, f.MaxQueueDepth, f.RPM, f.RPD, f.TPM, f.TPD, f.MinTime,
		adaptive, f.ShadowMaxConcurrent, f.ShadowModelConcurrency, affinityField(f.AffinityOff), f.DrainAtPercent,
	}
}

// EffectiveDefaults are the values that apply when an Advanced field is blank, shown
// as "default 30000". They follow the precedence connection → provider → global.
type EffectiveDefaults struct {
	MaxWaitMs          int64 // e.g. 30000
	ExecutionMaxWaitMs int64 // e.g. 600000
	MaxQueueDepth      int64 // 0 = unbounded
}

// ConnectionForm is the create/edit page's view model.
type ConnectionForm struct {
	// ID is empty when creating.
	ID string
	// Action is the POST target; "" means "/connections/new" when creating and
	// "/connections/{id}" when editing.
	Action string
	Fields ConnectionFields
	Errors FieldErrors
	// Windows are the connection's usage windows as the gateway last saw
	// them (subscription accounts), shown on edit.
	Windows []live.Window
	// APIKeyPreview is the stored key's preview ("…9f2c"), shown on edit.
	APIKeyPreview string
	// StoredEnabled is the stored enabled flag, which the Disable/Enable button toggles.
	StoredEnabled bool
	// StoredVersion is the stored row's version, which the Disable/Enable button sends:
	// after a conflict the form keeps the version it was loaded at, but the button acts
	// on the row as it is now. "" means Fields.Version.
	StoredVersion string
	// ReadOnly draws the form for a viewer: inputs disabled, no save or toggle buttons.
	ReadOnly bool
	Defaults EffectiveDefaults
	// Conflict, when set, shows that someone saved first; nothing was written.
	Conflict *Conflict
	// LastChange, when set, draws the footer.
	LastChange *Change
	// Warnings are localised notes about stored values that could not be read (the
	// gateway treats them as "no cap"), shown above the form.
	Warnings []string
	// Live, when set, is the connection right now, drawn as on the overview (its
	// gates' load, health, the last minute's errors linked to /requests, today's
	// volume) and refreshed by /live.
	Live *Overview
	// Probe, when set, is the answer to the "Test connection" button (one tiny
	// request through the real gateway path), shown above the form.
	Probe *ProbeView
	// ModelPrices are the stored models' prices from the settings (Found false:
	// the model has no price), shown under the models.
	ModelPrices []ModelPrice
}

// ModelPrice is one model of a connection and its price (limits.Prices.Lookup).
type ModelPrice struct {
	Model string
	Rate  limits.Rate
}

func (f ConnectionForm) editing() bool { return f.ID != "" }

func (f ConnectionForm) action() string {
	switch {
	case f.Action != "":
		return f.Action
	case f.editing():
		return "/connections/" + url.PathEscape(f.ID)
	default:
		return "/connections/new"
	}
}

// advancedOpen reports whether the Advanced section starts open: when any of its
// fields holds a value or an error.
func (f ConnectionForm) advancedOpen() bool {
	for _, v := range f.Fields.advanced() {
		if v != "" {
			return true
		}
	}
	for _, n := range advancedFields() {
		if f.Errors.Has(n) {
			return true
		}
	}
	return false
}

func (f ConnectionForm) idPath(suffix string) string {
	return "/connections/" + url.PathEscape(f.ID) + suffix
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

func connectionTitle(p Page, f ConnectionForm) string {
	if f.editing() {
		if f.Fields.Name != "" {
			return f.Fields.Name
		}
		return p.L.T("connections.edit")
	}
	return p.L.T("connections.new")
}

func apiKeyInput(p Page, f ConnectionForm) input {
	in := input{
		Name: "apiKey", Label: p.L.T("field.apiKey"), Value: f.Fields.APIKey, Type: "password",
		Errors: f.Errors.Get("apiKey"), Disabled: f.ReadOnly, Autocomplete: "new-password",
	}
	if f.editing() {
		in.Hint = p.L.T("hint.apiKeyKeep")
		// A key shorter than 24 characters has no preview (store's one rule).
		in.Placeholder = p.L.T("placeholder.apiKeyStoredNoPreview")
		if f.APIKeyPreview != "" {
			in.Placeholder = p.L.T("placeholder.apiKeyStored", f.APIKeyPreview)
		}
	} else {
		in.Required = true
		in.Hint = p.L.T("hint.apiKeyNew")
	}
	return in
}

func queueDepthPlaceholder(p Page, def int64) string {
	if def <= 0 {
		return p.L.T("placeholder.unbounded")
	}
	return p.L.T("placeholder.default", i64(def))
}

// toggleVersion is the version the Disable/Enable button sends.
func (f ConnectionForm) toggleVersion() string {
	if f.StoredVersion != "" {
		return f.StoredVersion
	}
	return f.Fields.Version
}

// affinityField is the affinity checkbox's value in advanced(): "" when on
// (the default, so it does not open the Advanced section), "false" when off.
func affinityField(off bool) string {
	if off {
		return "false"
	}
	return ""
}

// state is the row's health for the list: its live state when enabled and
// known, "ok" for an enabled connection the gateway has not reported yet,
// HealthDisabled when disabled.
func (c ConnectionRow) state() string {
	switch {
	case !c.Enabled:
		return HealthDisabled
	case c.Health == "":
		return live.HealthOK
	}
	return c.Health
}

// stateText words the row's state: "on" when healthy, else the health
// ("breaker open", "cooling", "suspended", "half-open (probing)").
func (c ConnectionRow) stateText(p Page) string {
	if s := c.state(); s != live.HealthOK {
		return p.L.T("health." + s)
	}
	return p.L.T("connections.on")
}
