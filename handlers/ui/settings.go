package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// settingsNumberFields are the settings form's number fields, by JSON name.
var settingsNumberFields = []string{
	"globalMaxConcurrent", "defaultMaxWaitMs", "defaultExecutionMaxWaitMs", "defaultMaxQueueDepth",
	"maxAttempts", "suspendMs", "breakerFailures", "breakerCooldownMs", "priorityAgingMs", "defaultOutputReserve",
	"maxOutputReserve",
	"affinityTtlMs", "maxAffinityBindings", "affinityMaxWaitMs",
	limits.KeySessionMaxConcurrent, limits.KeyLoopLimit, limits.KeyLoopWindowMs, limits.KeySessionBudgetUSD,
}

// storedSettingsFields fills the settings form from the stored row (absent keys
// blank: the form shows their defaults as placeholders).
func storedSettingsFields(st store.Settings) (web.SettingsFields, []string) {
	set, warns := limits.NormalizeSettings(st.Data)
	return web.SettingsFields{
		GlobalMaxConcurrent:       intText(set.GlobalMaxConcurrent),
		DefaultMaxWaitMs:          intText(set.DefaultMaxWaitMs),
		DefaultExecutionMaxWaitMs: intText(set.DefaultExecutionMaxWaitMs),
		DefaultMaxQueueDepth:      intText(set.DefaultMaxQueueDepth),
		MaxAttempts:               intText(set.MaxAttempts),
		SuspendMs:                 intText(set.SuspendMs),
		BreakerFailures:           intText(set.BreakerFailures),
		BreakerCooldownMs:         intText(set.BreakerCooldownMs),
		PriorityAgingMs:           intText(set.PriorityAgingMs),
		DefaultOutputReserve:      intText(set.DefaultOutputReserve),
		MaxOutputReserve:          intText(set.MaxOutputReserve),
		AffinityTTLMs:             intText(set.AffinityTTLMs),
		MaxAffinityBindings:       intText(set.MaxAffinityBindings),
		AffinityMaxWaitMs:         intText(set.AffinityMaxWaitMs),
		SessionMaxConcurrent:      intText(set.SessionMaxConcurrent),
		SessionBudget:             usdText(set.SessionBudgetUSD),
		LoopLimit:                 intText(set.LoopLimit),
		LoopWindowMs:              intText(set.LoopWindowMs),
		Providers:                 limits.FormatProviderCaps(set.Providers),
		Aliases:                   limits.FormatAliases(set.Aliases),
		Prices:                    limits.FormatPrices(set.Prices),
		Version:                   strconv.FormatInt(st.Version, 10),
	}, warns
}

// typedSettingsFields is what the form submitted, over base for fields left out.
func typedSettingsFields(form url.Values, base web.SettingsFields) web.SettingsFields {
	f := base
	for name, dst := range map[string]*string{
		"globalMaxConcurrent": &f.GlobalMaxConcurrent, "defaultMaxWaitMs": &f.DefaultMaxWaitMs,
		"defaultExecutionMaxWaitMs": &f.DefaultExecutionMaxWaitMs, "defaultMaxQueueDepth": &f.DefaultMaxQueueDepth,
		"maxAttempts": &f.MaxAttempts, "suspendMs": &f.SuspendMs, "breakerFailures": &f.BreakerFailures,
		"breakerCooldownMs": &f.BreakerCooldownMs, "priorityAgingMs": &f.PriorityAgingMs, "defaultOutputReserve": &f.DefaultOutputReserve,
		"maxOutputReserve": &f.MaxOutputReserve,
		"affinityTtlMs":    &f.AffinityTTLMs, "maxAffinityBindings": &f.MaxAffinityBindings, "affinityMaxWaitMs": &f.AffinityMaxWaitMs,
		"providers": &f.Providers, "aliases": &f.Aliases, limits.KeyPrices: &f.Prices, "version": &f.Version,
		limits.KeySessionMaxConcurrent: &f.SessionMaxConcurrent, limits.KeySessionBudgetUSD: &f.SessionBudget,
		limits.KeyLoopLimit: &f.LoopLimit, limits.KeyLoopWindowMs: &f.LoopWindowMs,
	} {
		if vs, ok := form[name]; ok && len(vs) > 0 {
			*dst = vs[0]
		}
	}
	return f
}

// applySettingsForm applies the form onto the stored settings document: a field
// absent from the form keeps its key, a blank one removes it. The result is checked
// strictly by limits.DecodeSettings, as PATCH /api/v1/settings does.
func applySettingsForm(l *web.Localizer, stored json.RawMessage, form url.Values) (json.RawMessage, web.FieldErrors, error) {
	members := map[string]json.RawMessage{}
	if err := json.Unmarshal(stored, &members); err != nil || members == nil {
		members = map[string]json.RawMessage{}
	}
	errs := web.FieldErrors{}
	for _, k := range settingsNumberFields {
		if _, ok := form[k]; !ok {
			continue
		}
		text := strings.TrimSpace(form.Get(k))
		if text == "" {
			delete(members, k)
			continue
		}
		if _, ok := httpkit.WholeNumber(json.RawMessage(text)); !ok && (k != limits.KeySessionBudgetUSD || !httpkit.IsJSONNumber(text)) {
			text = strconv.Quote(text) // the decoder rejects it with the field's range
		}
		members[k] = json.RawMessage(text)
	}
	if _, ok := form["providers"]; ok {
		// The stored providers as the page showed them (fail-open, like the page).
		shown, _ := limits.NormalizeSettings(stored)
		caps, lineErrs := limits.ApplyProviderCaps(shown.Providers, form.Get("providers"))
		for _, le := range lineErrs {
			errs.Add("providers", web.LineErrorMessage(l, le))
		}
		switch {
		case len(lineErrs) > 0:
		case len(caps) == 0:
			delete(members, "providers")
		default:
			raw, err := json.Marshal(caps)
			if err != nil {
				return nil, nil, fmt.Errorf("handlers: encode providers: %w", err)
			}
			members["providers"] = raw
		}
	}
	if _, ok := form[limits.KeyAliases]; ok {
		aliases, lineErrs := limits.ParseAliases(form.Get(limits.KeyAliases))
		for _, le := range lineErrs {
			errs.Add(limits.KeyAliases, web.LineErrorMessage(l, le))
		}
		switch {
		case len(lineErrs) > 0:
		case len(aliases) == 0:
			delete(members, limits.KeyAliases)
		default:
			raw, err := json.Marshal(aliases)
			if err != nil {
				return nil, nil, fmt.Errorf("handlers: encode aliases: %w", err)
			}
			members[limits.KeyAliases] = raw
		}
	}
	if _, ok := form[limits.KeyPrices]; ok {
		prices, lineErrs := limits.ParsePrices(form.Get(limits.KeyPrices))
		for _, le := range lineErrs {
			errs.Add(limits.KeyPrices, web.LineErrorMessage(l, le))
		}
		switch {
		case len(lineErrs) > 0:
		case len(prices) == 0:
			delete(members, limits.KeyPrices)
		default:
			raw, err := json.Marshal(prices)
			if err != nil {
				return nil, nil, fmt.Errorf("handlers: encode prices: %w", err)
			}
			members[limits.KeyPrices] = raw
		}
	}
	merged, err := json.Marshal(members)
	if err != nil {
		return nil, nil, fmt.Errorf("handlers: encode settings form: %w", err)
	}
	set, fe := limits.DecodeSettings(merged, "")
	uiAddErrors(l, errs, fe)
	if errs.Any() {
		return nil, errs, nil
	}
	data, err := json.Marshal(set)
	if err != nil {
		return nil, nil, fmt.Errorf("handlers: encode settings: %w", err)
	}
	return data, nil, nil
}

// settingsForm completes the settings page's view model.
func (s *Server) settingsForm(r *http.Request, rq *uiRequest, st store.Settings, fields web.SettingsFields, errs web.FieldErrors) (web.SettingsForm, error) {
	f := web.SettingsForm{Fields: fields, Errors: errs, ReadOnly: rq.user.Role != store.RoleAdmin}
	_, warns := limits.NormalizeSettingsErrors(st.Data)
	f.Warnings = uiStoredWarnings(rq.l, warns)
	last, err := s.uiLatestChange(r.Context(), store.EntitySettings, "")
	if err != nil {
		return f, err
	}
	if last != nil {
		f.LastChange = &web.Change{By: last.Actor, At: last.CreatedAt, Version: st.Version, AuditURL: "/audit"}
	}
	return f, nil
}

// Settings serves GET /settings.
func (s *Server) Settings(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	st, err := s.store.GetSettings(r.Context())
	if err != nil {
		return err
	}
	fields, _ := storedSettingsFields(st)
	f, err := s.settingsForm(r, rq, st, fields, nil)
	if err != nil {
		return err
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.SettingsPage(s.uiPage(r, rq), f))
}

// SaveSettings serves POST /settings, with the same version check and error
// handling as a connection's form.
func (s *Server) SaveSettings(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	form, version, err := uiVersionedForm(r)
	if err != nil {
		return err
	}
	before, after, errs, err := uiApply(
		func(fn func(store.Settings) (json.RawMessage, error)) (store.Settings, error) {
			return s.store.UpdateSettings(r.Context(), uiActor(rq), version, fn)
		},
		func(cur store.Settings) (json.RawMessage, web.FieldErrors, error) {
			return applySettingsForm(rq.l, cur.Data, form)
		})
	status := http.StatusUnprocessableEntity
	switch {
	case err == nil:
		msg := rq.l.T("flash.settings.savedNoChange")
		if sum := uiChangeSummary(rq.l, before.Data, after.Data); sum != "" {
			msg = rq.l.T("flash.settings.saved", sum)
		}
		return s.uiFlash(w, r, rq, web.FlashSuccess, msg, "/settings")
	case errors.Is(err, errUIInvalid):
	case errors.Is(err, store.ErrStale):
		status = http.StatusConflict
		if before, err = s.store.GetSettings(r.Context()); err != nil {
			return err
		}
	default:
		return err
	}
	stored, _ := storedSettingsFields(before)
	f, err := s.settingsForm(r, rq, before, typedSettingsFields(form, stored), errs)
	if err != nil {
		return err
	}
	if status == http.StatusConflict {
		f.Conflict = uiConflict(f.LastChange, before.Version, before.UpdatedAt, "/settings")
	}
	return s.uiRender(w, r, rq, status, web.SettingsPage(s.uiPage(r, rq), f))
}
