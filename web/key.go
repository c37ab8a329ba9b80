package web

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// KeyItem is one client key or API token in a list. Secrets are never listed: only
// their preview.
type KeyItem struct {
	ID         string
	Name       string
	Preview    string // e.g. "gh_…9f2c"
	Role       string // API tokens only: RoleAdmin or RoleViewer
	CreatedAt  time.Time
	LastUsedAt time.Time // zero = never used
	// Client keys only: whether the key may be used, its limits as the gateway
	// reads them (fail-open), and its live load on this replica (zero when the
	// gateway has not seen the key yet).
	Enabled bool
	Limits  limits.ClientKeyLimits
	Live    live.Client
	// SpentTodayMicros and SpentMonthMicros are what the key spent on the
	// current UTC day and month (the request log's spend), in micro-dollars.
	SpentTodayMicros, SpentMonthMicros int64
	// Cache is the key's prompt-cache use over the last 24 hours.
	Cache CacheRow
}

// spendOf is spent micro-dollars in dollars, "of" the money budget when one is
// set ("$0.42 of $5").
func spendOf(page Page, spent int64, budget *limits.Micros) string {
	if budget == nil || *budget <= 0 {
		return usd(spent)
	}
	return page.L.T("spend.ofBudget", usd(spent), usd(int64(*budget)))
}

// CreatedSecret is a secret just created, shown once on the page after creation.
type CreatedSecret struct {
	Name   string
	Secret string
}

// KeyList is the view model of the client keys page and of the API tokens page.
type KeyList struct {
	Items []KeyItem
	// Created, when set, shows the new secret once (data-testid="new-secret").
	Created *CreatedSecret
	// Name and Role are what was typed in the create form (Role: tokens only).
	Name   string
	Role   string
	Errors FieldErrors
	// LiveURL is the JSON endpoint static/app.js polls to keep the client keys'
	// in-flight and queued columns current ("/live"); "" turns live refresh off.
	LiveURL        string
	LiveIntervalMs int
}

// revokeURL is the confirmation page for revoking one key or token:
// "/keys/{id}/revoke" or "/tokens/{id}/revoke".
func revokeURL(base, id string) string { return base + "/" + url.PathEscape(id) + "/revoke" }

// KeyURL is the page of one client key, where its limits are edited: "/keys/{id}".
func KeyURL(id string) string { return "/keys/" + url.PathEscape(id) }

func keyKind(tokens bool) string {
	if tokens {
		return "tokens"
	}
	return "keys"
}

// keyLimitsShown is how many models a list row names before "+N more".
const keyLimitsShown = 3

// modelsSummary names a key's models for a list: "all models" when it has no list,
// else the first few and how many more.
func modelsSummary(p Page, models []string) string {
	if len(models) == 0 {
		return p.L.T("keys.allModels")
	}
	if len(models) <= keyLimitsShown {
		return strings.Join(models, ", ")
	}
	return p.L.T("keys.modelsMore", strings.Join(models[:keyLimitsShown], ", "), len(models)-keyLimitsShown)
}

// limitText writes an optional whole-number limit with its unit, "–" when absent
// or 0 (none).
func limitText[T int | int64](p Page, v *T, unit string) string {
	if v == nil || *v <= 0 {
		return NoCap
	}
	s := p.L.Int(int64(*v))
	if unit != "" {
		s += " " + p.L.T(unit)
	}
	return s
}

// weightText writes a key's weight; absent is the default, marked so.
func weightText(p Page, w *int) string {
	if w == nil {
		return p.L.T("keys.weightDefault", limits.DefaultWeight)
	}
	return strconv.Itoa(*w)
}

// priorityText is a key's class on the keys table: its name, or the default's
// marked as such.
func priorityText(p Page, name *string) string {
	if name == nil {
		return p.L.T("keys.priorityDefault", p.L.T("priority."+limits.DefaultPriority))
	}
	return p.L.T("priority." + *name)
}

// KeyFields is what a client key's limits form holds, as typed: each value is the
// raw text of its input, so a failed save re-renders exactly what was typed. Form
// names are the JSON names of the limits (limits.ClientKeyLimitKeys), plus
// "enabled" and the hidden "version".
type KeyFields struct {
	Weight        string // weight
	MaxConcurrent string // maxConcurrent
	MaxWaitMs     string // maxWaitMs
	RPM           string // rpm
	TPM           string // tpm
	TPD           string // tpd
	BudgetDaily   string // budgetUsdDaily: dollars
	BudgetMonthly string // budgetUsdMonthly: dollars
	Models        string // models: one entry a line (limits.ParseModelList)
	Priority      string // priority: a class's name, "" for the default
	// The runaway guards: sessionMaxConcurrent, sessionBudgetUsd (dollars),
	// loopLimit, loopWindowMs.
	SessionMaxConcurrent, SessionBudget, LoopLimit, LoopWindowMs string
	Enabled                                                      bool   // enabled (drawn after a hidden "false")
	Version                                                      string // version (hidden): the version the form was loaded at
}

// KeyFieldNames returns the key form's field names in page order; errors under any
// other name are shown at the top of the form.
func KeyFieldNames() []string {
	return append(limits.ClientKeyLimitKeys(), "enabled")
}

// KeyForm is the view model of a client key's page, /keys/{id}.
type KeyForm struct {
	ID      string
	Name    string
	Preview string
	Fields  KeyFields
	Errors  FieldErrors
	// ReadOnly draws the form for a viewer: inputs disabled, no save button.
	ReadOnly bool
	// Live is the key's load on this replica; HasLive is false when the gateway has
	// not seen the key yet.
	Live    live.Client
	HasLive bool
	// Conflict, when set, shows that someone saved first; nothing was written.
	Conflict *Conflict
	// LastChange, when set, draws the footer.
	LastChange *Change
	// Warnings are localised notes about stored limits that could not be read (the
	// gateway treats them as absent), shown above the form.
	Warnings []string
}
