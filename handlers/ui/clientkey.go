package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// A client key's page, /keys/{id}: its live load and a form for every limit. The
// form follows the connection editor's rules — field names are the JSON names, a
// field absent from the form keeps its key, a blank one removes it — and saves
// through the store method the REST PATCH uses (audited, NOTIFY'd, versioned).

// storedKeyFields fills a key's form from the stored key (its limits read
// fail-open, as the gateway reads them).
func storedKeyFields(k store.ClientKey) web.KeyFields {
	l, _ := limits.NormalizeClientKeyLimits(k.Limits)
	return web.KeyFields{
		Weight:        intText(l.Weight),
		MaxConcurrent: intText(l.MaxConcurrent),
		MaxWaitMs:     intText(l.MaxWaitMs),
		RPM:           intText(l.RPM),
		TPM:           intText(l.TPM),
		TPD:           intText(l.TPD),
		BudgetDaily:   usdText(l.BudgetUSDDaily),
		BudgetMonthly: usdText(l.BudgetUSDMonthly),
		Models:        limits.FormatModelList(l.Models),
		Priority:      valueText(l.Priority),
		Enabled:       k.Enabled,

		SessionMaxConcurrent: intText(l.SessionMaxConcurrent),
		SessionBudget:        usdText(l.SessionBudgetUSD),
		LoopLimit:            intText(l.LoopLimit),
		LoopWindowMs:         intText(l.LoopWindowMs),
		Version:              strconv.FormatInt(k.Version, 10),
	}
}

// usdText is an optional money limit as the form shows it (dollars), "" when
// absent.
func usdText(p *limits.Micros) string {
	if p == nil {
		return ""
	}
	return p.String()
}

// valueText is an optional text limit as the form shows it, "" when absent.
func valueText(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// typedKeyFields is what the form submitted, over base for the fields it left out.
func typedKeyFields(form url.Values, base web.KeyFields) web.KeyFields {
	f := base
	for name, dst := range map[string]*string{
		limits.KeyWeight: &f.Weight, limits.KeyMaxConcurrent: &f.MaxConcurrent, limits.KeyMaxWaitMs: &f.MaxWaitMs,
		limits.KeyRPM: &f.RPM, limits.KeyTPM: &f.TPM, limits.KeyTPD: &f.TPD, limits.KeyModels: &f.Models,
		limits.KeyPriority: &f.Priority, "version": &f.Version,
		limits.KeyBudgetUSDDaily: &f.BudgetDaily, limits.KeyBudgetUSDMonthly: &f.BudgetMonthly,
		limits.KeySessionMaxConcurrent: &f.SessionMaxConcurrent, limits.KeySessionBudgetUSD: &f.SessionBudget,
		limits.KeyLoopLimit: &f.LoopLimit, limits.KeyLoopWindowMs: &f.LoopWindowMs,
	} {
		if vs, ok := form[name]; ok && len(vs) > 0 {
			*dst = vs[0]
		}
	}
	if vs, ok := form["enabled"]; ok {
		f.Enabled = formBool(vs)
	}
	return f
}

// clientKeyInput applies a key form onto the stored key cur: the limits through
// limits.ApplyClientKeyForm, then the whole key through the REST API's rules
// (decodeClientKey), so the dashboard can store nothing the API would refuse. It
// returns the problems in the reader's language, or nil.
func (s *Server) clientKeyInput(l *web.Localizer, form url.Values, cur store.ClientKey) (store.ClientKeyInput, web.FieldErrors, error) {
	errs := web.FieldErrors{}
	base, _ := limits.NormalizeClientKeyLimits(cur.Limits)
	lim, fe := limits.ApplyClientKeyForm(base, form, "limits")
	if len(fe) > 0 {
		uiAddErrors(l, errs, fe)
		return store.ClientKeyInput{}, errs, nil
	}
	doc := map[string]any{"name": cur.Name, "enabled": cur.Enabled, "limits": lim}
	if vs, ok := form["enabled"]; ok {
		doc["enabled"] = formBool(vs)
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return store.ClientKeyInput{}, nil, fmt.Errorf("handlers: encode client key form: %w", err)
	}
	in, err := s.DecodeClientKey(body, "")
	var apiErrs limits.FieldErrors
	switch {
	case errors.As(err, &apiErrs):
		uiAddErrors(l, errs, apiErrs)
		return store.ClientKeyInput{}, errs, nil
	case err != nil:
		return store.ClientKeyInput{}, nil, err
	}
	return in, nil, nil
}

// keyForm completes a key page's view model: live load, warnings about stored
// limits, the last change, read-only for viewers.
func (s *Server) keyForm(ctx context.Context, rq *uiRequest, k store.ClientKey, fields web.KeyFields, errs web.FieldErrors) (web.KeyForm, error) {
	f := web.KeyForm{ID: k.ID, Name: k.Name, Preview: k.Preview, Fields: fields, Errors: errs,
		ReadOnly: rq.user.Role != store.RoleAdmin}
	snap := s.LiveSnapshot()
	f.Live, f.HasLive = snap.Client(k.ID)
	_, warns := limits.NormalizeClientKeyLimitsErrors(k.Limits)
	f.Warnings = uiStoredWarnings(rq.l, warns)
	last, err := s.uiLatestChange(ctx, store.EntityClientKey, k.ID)
	if err != nil {
		return f, err
	}
	if last != nil {
		f.LastChange = &web.Change{
			By: last.Actor, At: last.CreatedAt, Version: k.Version,
			AuditURL: "/audit?entity=" + store.EntityClientKey + "&id=" + url.QueryEscape(k.ID),
		}
	}
	return f, nil
}

// EditKey serves GET /keys/{id}.
func (s *Server) EditKey(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	k, err := s.store.GetClientKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	f, err := s.keyForm(r.Context(), rq, k, storedKeyFields(k), nil)
	if err != nil {
		return err
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.KeyFormPage(s.uiPage(r, rq), f))
}

// SaveKey serves POST /keys/{id}: the form applied onto the stored key under its
// lock, only if the key is still at the version the form was loaded at (else 409
// with a conflict banner and what was typed); bad input comes back with every error
// beside its field (422). Either way nothing is written.
func (s *Server) SaveKey(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	id := r.PathValue("id")
	form, version, err := uiVersionedForm(r)
	if err != nil {
		return err
	}
	before, after, errs, err := uiApply(
		func(fn func(store.ClientKey) (store.ClientKeyInput, error)) (store.ClientKey, error) {
			return s.store.UpdateClientKey(r.Context(), uiActor(rq), id, version, fn)
		},
		func(cur store.ClientKey) (store.ClientKeyInput, web.FieldErrors, error) {
			return s.clientKeyInput(rq.l, form, cur)
		})
	status := http.StatusUnprocessableEntity
	switch {
	case err == nil:
		msg := rq.l.T("flash.key.savedNoChange", after.Name)
		if sum := uiChangeSummary(rq.l, before, after); sum != "" {
			msg = rq.l.T("flash.key.saved", after.Name, sum)
		}
		return s.uiFlash(w, r, rq, web.FlashSuccess, msg, web.KeyURL(after.ID))
	case errors.Is(err, errUIInvalid):
	case errors.Is(err, store.ErrStale):
		status = http.StatusConflict
		if before, err = s.store.GetClientKey(r.Context(), id); err != nil {
			return err
		}
	default:
		return err
	}
	f, err := s.keyForm(r.Context(), rq, before, typedKeyFields(form, storedKeyFields(before)), errs)
	if err != nil {
		return err
	}
	if status == http.StatusConflict {
		f.Conflict = uiConflict(f.LastChange, before.Version, before.UpdatedAt, web.KeyURL(id))
	}
	return s.uiRender(w, r, rq, status, web.KeyFormPage(s.uiPage(r, rq), f))
}
