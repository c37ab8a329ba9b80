package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// Connections serves GET /connections: every connection with its live load.
func (s *Server) Connections(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	conns, err := s.store.ListConnections(r.Context())
	if err != nil {
		return err
	}
	snap := s.LiveSnapshot()
	health := map[string]string{}
	for _, c := range snap.Connections {
		health[c.ID] = c.Health
	}
	v := web.ConnectionList{LiveURL: "/live", LiveIntervalMs: liveInterval}
	loads := connectionLoads(snap.Gates)
	for _, c := range conns {
		o, _ := limits.Normalize(c.RateLimitOverrides)
		row := web.ConnectionRow{
			ID: c.ID, Name: c.Name, Provider: c.Provider, APIStyle: c.APIStyle, Models: c.Models,
			ModelCaps: o.ModelConcurrency, Enabled: c.Enabled, Health: health[c.ID],
		}
		if o.MaxConcurrent != nil {
			row.MaxConcurrent = *o.MaxConcurrent
		}
		row.InFlight, row.Queued = loads[c.ID].InFlight, loads[c.ID].Queued
		v.Items = append(v.Items, row)
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.ConnectionsPage(s.uiPage(r, rq), v))
}

// storedFields fills a connection form from a stored connection.
func storedFields(c store.Connection) web.ConnectionFields {
	o, _ := limits.Normalize(c.RateLimitOverrides)
	f := web.ConnectionFields{
		Name: c.Name, Provider: c.Provider, APIStyle: c.APIStyle, BaseURL: c.BaseURL,
		Priority: strconv.Itoa(c.Priority), Models: strings.Join(c.Models, "\n"), Enabled: c.Enabled,
		MaxConcurrent:      intText(o.MaxConcurrent),
		ModelConcurrency:   limits.FormatModelCaps(o.ModelConcurrency),
		MaxWaitMs:          intText(o.MaxWaitMs),
		ExecutionMaxWaitMs: intText(o.ExecutionMaxWaitMs),
		MaxQueueDepth:      intText(o.MaxQueueDepth),
		RPM:                intText(o.RPM),
		RPD:                intText(o.RPD),
		TPM:                intText(o.TPM),
		TPD:                intText(o.TPD),
		MinTime:            intText(o.MinTimeMs),
		Adaptive:           o.IsAdaptive(),
		AffinityOff:        !o.AffinityOn(),
		DrainAtPercent:     intText(o.DrainAtPercent),
		Version:            strconv.FormatInt(c.Version, 10),
	}
	if o.Shadow != nil {
		f.ShadowMaxConcurrent = intText(o.Shadow.MaxConcurrent)
		f.ShadowModelConcurrency = limits.FormatModelCaps(o.Shadow.ModelConcurrency)
	}
	return f
}

// typedFields is what the form submitted, over base for the fields it left out, so a
// re-rendered form shows exactly what was typed.
func typedFields(form url.Values, base web.ConnectionFields) web.ConnectionFields {
	f := base
	for name, dst := range map[string]*string{
		"name": &f.Name, "provider": &f.Provider, "apiStyle": &f.APIStyle, "baseUrl": &f.BaseURL,
		"apiKey": &f.APIKey, "priority": &f.Priority, "models": &f.Models,
		"maxConcurrent": &f.MaxConcurrent, "modelConcurrency": &f.ModelConcurrency,
		"maxWaitMs": &f.MaxWaitMs, "executionMaxWaitMs": &f.ExecutionMaxWaitMs,
		"maxQueueDepth": &f.MaxQueueDepth, "rpm": &f.RPM, "rpd": &f.RPD, "tpm": &f.TPM,
		"tpd": &f.TPD, "minTime": &f.MinTime, "version": &f.Version, limits.KeyDrainAtPercent: &f.DrainAtPercent,
		limits.FormShadowMaxConcurrent: &f.ShadowMaxConcurrent, limits.FormShadowModelConcurrency: &f.ShadowModelConcurrency,
	} {
		if vs, ok := form[name]; ok && len(vs) > 0 {
			*dst = vs[0]
		}
	}
	if vs, ok := form["enabled"]; ok {
		f.Enabled = formBool(vs)
	}
	if vs, ok := form[limits.KeyAdaptive]; ok {
		f.Adaptive = formBool(vs)
	}
	if vs, ok := form[limits.KeyAffinity]; ok {
		f.AffinityOff = !formBool(vs)
	}
	return f
}

// formBool reads a checkbox preceded by a hidden "false": true when any value is
// "true" (or a bare checkbox's "on").
func formBool(vs []string) bool {
	for _, v := range vs {
		if v == "true" || v == "on" {
			return true
		}
	}
	return false
}

// connectionInput builds the connection a form describes and checks it with the
// rules of the REST API (decodeConnection). On edit, cur is the stored row: a field
// absent from the form keeps its stored value, the overrides are applied onto the
// stored ones (limits.ApplyForm) and a blank apiKey keeps the stored key.
func (s *Server) connectionInput(ctx context.Context, l *web.Localizer, form url.Values, cur *store.Connection) (store.ConnectionInput, web.FieldErrors, error) {
	doc := map[string]any{"enabled": true}
	var base limits.Overrides
	if cur != nil {
		doc = map[string]any{
			"name": cur.Name, "provider": cur.Provider, "apiStyle": cur.APIStyle, "baseUrl": cur.BaseURL,
			"models": cur.Models, "priority": cur.Priority, "enabled": cur.Enabled,
		}
		base, _ = limits.Normalize(cur.RateLimitOverrides)
	}
	errs := web.FieldErrors{}
	// skip names the fields whose problems are already worded here, so the API's
	// rules do not report them twice; every other problem they find is shown (a
	// problem left out could let a refused input reach the store).
	var skip []string
	for _, k := range []string{"name", "provider", "apiStyle", "baseUrl"} {
		if _, ok := form[k]; ok {
			doc[k] = strings.TrimSpace(form.Get(k))
		}
	}
	if key := strings.TrimSpace(form.Get("apiKey")); key != "" {
		doc["apiKey"] = key
	}
	if _, ok := form["models"]; ok {
		models := []string{}
		for line := range strings.SplitSeq(form.Get("models"), "\n") {
			if m := strings.TrimSpace(line); m != "" {
				models = append(models, m)
			}
		}
		doc["models"] = models
	}
	if _, ok := form["priority"]; ok {
		text := strings.TrimSpace(form.Get("priority"))
		if text == "" {
			doc["priority"] = 0
		} else if n, err := strconv.Atoi(text); err == nil {
			doc["priority"] = n
		} else {
			delete(doc, "priority")
			errs.Add("priority", l.T("validation.wholeNumber", -1000, 1000))
			skip = append(skip, "priority")
		}
	}
	if vs, ok := form["enabled"]; ok {
		doc["enabled"] = formBool(vs)
	}
	overrides, fe := limits.ApplyForm(base, form, "rateLimitOverrides")
	if len(fe) > 0 {
		var worded []string
		for _, field := range []string{limits.KeyModelConcurrency, limits.FormShadowModelConcurrency} {
			if uiModelCapErrors(l, form, field, errs) {
				worded = append(worded, field)
			}
		}
		uiAddErrors(l, errs, fe, worded...)
	} else {
		doc["rateLimitOverrides"] = overrides
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return store.ConnectionInput{}, nil, fmt.Errorf("handlers: encode connection form: %w", err)
	}
	in, err := s.DecodeConnection(body, cur == nil)
	var apiErrs limits.FieldErrors
	switch {
	case errors.As(err, &apiErrs):
		uiAddErrors(l, errs, apiErrs, skip...)
	case err != nil:
		return store.ConnectionInput{}, nil, err
	}
	if errs.Any() {
		return store.ConnectionInput{}, errs, nil
	}
	if fe := s.UpstreamErrors(ctx, cur, in); len(fe) > 0 {
		uiAddErrors(l, errs, fe)
		return store.ConnectionInput{}, errs, nil
	}
	return in, nil, nil
}

// connectionForm completes a connection form's view model: defaults shown in blank
// fields, the stored key's preview, the last change, read-only for viewers.
func (s *Server) connectionForm(ctx context.Context, rq *uiRequest, cur *store.Connection, fields web.ConnectionFields, errs web.FieldErrors) (web.ConnectionForm, error) {
	f := web.ConnectionForm{Fields: fields, Errors: errs, ReadOnly: rq.user.Role != store.RoleAdmin}
	var overrides limits.Overrides
	if cur != nil {
		f.ID, f.APIKeyPreview, f.StoredEnabled = cur.ID, cur.APIKeyPreview, cur.Enabled
		for _, c := range s.LiveSnapshot().Connections {
			if c.ID == cur.ID {
				f.Windows = c.Windows
			}
		}
		f.StoredVersion = strconv.FormatInt(cur.Version, 10)
		var warns limits.FieldErrors
		overrides, warns = limits.NormalizeErrors(cur.RateLimitOverrides)
		f.Warnings = uiStoredWarnings(rq.l, warns)
		last, err := s.uiLatestChange(ctx, store.EntityConnection, cur.ID)
		if err != nil {
			return f, err
		}
		if last != nil {
			f.LastChange = &web.Change{
				By: last.Actor, At: last.CreatedAt, Version: cur.Version,
				AuditURL: "/audit?entity=" + store.EntityConnection + "&id=" + url.QueryEscape(cur.ID),
			}
		}
	}
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return f, err
	}
	settings, _ := limits.NormalizeSettings(st.Data)
	eff := limits.Resolve(settings, strings.TrimSpace(fields.Provider), overrides)
	f.Defaults = web.EffectiveDefaults{
		MaxWaitMs:          eff.Fallback(limits.KeyMaxWaitMs).Value,
		ExecutionMaxWaitMs: eff.Fallback(limits.KeyExecutionMaxWaitMs).Value,
		MaxQueueDepth:      eff.Fallback(limits.KeyMaxQueueDepth).Value,
	}
	if cur != nil {
		for _, m := range cur.Models {
			f.ModelPrices = append(f.ModelPrices, web.ModelPrice{Model: m, Rate: settings.Prices.Lookup(cur.Provider, m)})
		}
	}
	return f, nil
}

// NewConnection serves GET /connections/new.
func (s *Server) NewConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	f, err := s.connectionForm(r.Context(), rq, nil, web.ConnectionFields{APIStyle: "openai", Enabled: true}, nil)
	if err != nil {
		return err
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.ConnectionFormPage(s.uiPage(r, rq), f))
}

// CreateConnection serves POST /connections/new.
func (s *Server) CreateConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	form, err := uiForm(r)
	if err != nil {
		return err
	}
	fields := typedFields(form, web.ConnectionFields{APIStyle: "openai", Enabled: true})
	in, errs, err := s.connectionInput(r.Context(), rq.l, form, nil)
	if err != nil {
		return err
	}
	if errs == nil {
		c, err := s.store.CreateConnection(r.Context(), uiActor(rq), in)
		switch {
		case errors.Is(err, store.ErrConflict):
			errs = web.FieldErrors{"name": {rq.l.T("validation.nameTaken")}}
		case err != nil:
			return err
		default:
			return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.connection.created", c.Name), connectionURL(c.ID))
		}
	}
	fields.APIKey = "" // a secret is never sent back
	f, err := s.connectionForm(r.Context(), rq, nil, fields, errs)
	if err != nil {
		return err
	}
	return s.uiRender(w, r, rq, http.StatusUnprocessableEntity, web.ConnectionFormPage(s.uiPage(r, rq), f))
}

// EditConnection serves GET /connections/{id}.
func (s *Server) EditConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	c, err := s.store.GetConnection(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	f, err := s.connectionForm(r.Context(), rq, &c, storedFields(c), nil)
	if err != nil {
		return err
	}
	f.Live = s.connectionLive(r, rq, c)
	return s.uiRender(w, r, rq, http.StatusOK, web.ConnectionFormPage(s.uiPage(r, rq), f))
}

// SaveConnection serves POST /connections/{id}: the form applied onto the stored
// row under its lock, only if the row is still at the version the form was loaded
// at. Otherwise the form comes back with a conflict banner (409) and what was typed,
// unsaved; bad input comes back with every error beside its field (422).
func (s *Server) SaveConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	id := r.PathValue("id")
	form, version, err := uiVersionedForm(r)
	if err != nil {
		return err
	}
	before, after, errs, err := uiApply(
		func(fn func(store.Connection) (store.ConnectionInput, error)) (store.Connection, error) {
			return s.store.UpdateConnection(r.Context(), uiActor(rq), id, version, fn)
		},
		func(cur store.Connection) (store.ConnectionInput, web.FieldErrors, error) {
			return s.connectionInput(r.Context(), rq.l, form, &cur)
		})
	status := http.StatusUnprocessableEntity
	switch {
	case err == nil:
		msg := rq.l.T("flash.connection.savedNoChange", after.Name)
		if sum := uiChangeSummary(rq.l, before, after); sum != "" {
			msg = rq.l.T("flash.connection.saved", after.Name, sum)
		}
		return s.uiFlash(w, r, rq, web.FlashSuccess, msg, connectionURL(after.ID))
	case errors.Is(err, errUIInvalid):
	case errors.Is(err, store.ErrConflict):
		errs = web.FieldErrors{"name": {rq.l.T("validation.nameTaken")}}
	case errors.Is(err, store.ErrStale):
		status = http.StatusConflict
		if before, err = s.store.GetConnection(r.Context(), id); err != nil {
			return err
		}
	default:
		return err
	}
	fields := typedFields(form, storedFields(before))
	fields.APIKey = ""
	f, err := s.connectionForm(r.Context(), rq, &before, fields, errs)
	if err != nil {
		return err
	}
	if status == http.StatusConflict {
		f.Conflict = uiConflict(f.LastChange, before.Version, before.UpdatedAt, connectionURL(id))
	}
	return s.uiRender(w, r, rq, status, web.ConnectionFormPage(s.uiPage(r, rq), f))
}

// ToggleConnection serves POST /connections/{id}/toggle (Enable/Disable).
func (s *Server) ToggleConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	id := r.PathValue("id")
	_, version, err := uiVersionedForm(r)
	if err != nil {
		return err
	}
	c, err := s.store.UpdateConnection(r.Context(), uiActor(rq), id, version,
		func(cur store.Connection) (store.ConnectionInput, error) {
			in := cur.Input()
			in.APIKey = ""
			in.Enabled = !cur.Enabled
			return in, nil
		})
	switch {
	case errors.Is(err, store.ErrStale):
		return s.uiStale(w, r, rq, id)
	case err != nil:
		return err
	case c.Enabled:
		return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.connection.enabled", c.Name), connectionURL(id))
	default:
		return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.connection.disabled", c.Name), connectionURL(id))
	}
}

// uiStale sends the editor back to the current values of a connection that changed
// under them; nothing was written.
func (s *Server) uiStale(w http.ResponseWriter, r *http.Request, rq *uiRequest, id string) error {
	c, err := s.store.GetConnection(r.Context(), id)
	if err != nil {
		return err
	}
	return s.uiFlash(w, r, rq, web.FlashError, rq.l.T("flash.connection.stale", c.Name), connectionURL(id))
}

// ConfirmDeleteConnection serves GET /connections/{id}/delete.
func (s *Server) ConfirmDeleteConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	c, err := s.store.GetConnection(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.ConfirmDeletePage(s.uiPage(r, rq), web.ConfirmDelete{
		Title:     rq.l.T("confirm.connection.title", c.Name),
		Message:   rq.l.T("confirm.connection.body"),
		Action:    connectionURL(c.ID) + "/delete",
		CancelURL: connectionURL(c.ID),
		Version:   strconv.FormatInt(c.Version, 10),
	}))
}

// DeleteConnection serves POST /connections/{id}/delete.
func (s *Server) DeleteConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	id := r.PathValue("id")
	_, version, err := uiVersionedForm(r)
	if err != nil {
		return err
	}
	c, err := s.store.GetConnection(r.Context(), id)
	if err != nil {
		return err
	}
	err = s.store.DeleteConnection(r.Context(), uiActor(rq), id, version)
	switch {
	case errors.Is(err, store.ErrStale):
		return s.uiStale(w, r, rq, id)
	case err != nil:
		return err
	}
	return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.connection.deleted", c.Name), "/connections")
}

func connectionURL(id string) string { return "/connections/" + url.PathEscape(id) }
