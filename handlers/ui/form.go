package ui

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// errUIInvalid aborts a store update whose form did not validate; the handler then
// re-renders the form with the errors it collected.
var errUIInvalid = errors.New("handlers: dashboard form has errors")

// uiApply runs a versioned store update whose new value comes from a form. update is
// the store method, bound to its row and version; input turns the row as it is under
// the lock into what to write, or into field errors, which abort the update (err is
// then errUIInvalid) so that nothing is written. before is the row the form was
// applied to, for the change summary.
func uiApply[T, In any](update func(func(T) (In, error)) (T, error),
	input func(cur T) (In, web.FieldErrors, error)) (before, after T, errs web.FieldErrors, err error) {
	after, err = update(func(cur T) (In, error) {
		before = cur
		in, fe, err := input(cur)
		if err == nil && fe != nil {
			errs, err = fe, errUIInvalid
		}
		return in, err
	})
	return before, after, errs, err
}

// uiAddErrors localises validation problems (paths as the API reports them) by their
// codes and adds them under their form fields, each message once per field. skip
// names form fields whose problems were already reported in the form's own words.
func uiAddErrors(l *web.Localizer, dst web.FieldErrors, fe limits.FieldErrors, skip ...string) {
	for _, e := range fe {
		field := web.FormField(e.Field)
		if slices.Contains(skip, field) {
			continue
		}
		msg := web.FieldErrorMessage(l, e)
		if !slices.Contains(dst.Get(field), msg) {
			dst.Add(field, msg)
		}
	}
}

// uiModelCapErrors re-reads a per-model caps textarea (field: modelConcurrency or
// shadow.modelConcurrency, when it was submitted) and words each bad line with its
// number, in line order, as `line 2: "glm-5=0": cap must be …`. It reports whether
// it found any.
func uiModelCapErrors(l *web.Localizer, form url.Values, field string, dst web.FieldErrors) bool {
	if _, ok := form[field]; !ok {
		return false
	}
	_, lineErrs := limits.ParseModelCaps(form.Get(field))
	for _, le := range lineErrs {
		dst.Add(field, web.LineErrorMessage(l, le))
	}
	return len(lineErrs) > 0
}

// uiStoredWarnings words the parts of a stored document that a fail-open read dropped
// (limits.NormalizeErrors), one warning each: "A stored value could not be read …:
// rateLimitOverrides.maxWaitMs: must be a whole number from 0 to 120000".
func uiStoredWarnings(l *web.Localizer, dropped limits.FieldErrors) []string {
	var out []string
	for _, e := range dropped {
		out = append(out, l.T("warning.storedValue", e.Field+": "+web.FieldErrorMessage(l, e)))
	}
	return out
}

// intText writes an optional number as a form shows it ("" when absent).
func intText[T int | int64](p *T) string {
	if p == nil {
		return ""
	}
	return strconv.FormatInt(int64(*p), 10)
}

// formVersion reads the hidden version field. A form without it (a script posting
// only the fields it changes) gets 0, which makes the write unconditional, like an
// API write without If-Match; a version that is present must be a valid one.
func formVersion(form url.Values) (int64, error) {
	raw := strings.TrimSpace(form.Get("version"))
	if raw == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < 1 {
		return 0, errUIBadForm
	}
	return v, nil
}

// uiVersionedForm reads a posted form and its hidden version field (see formVersion).
func uiVersionedForm(r *http.Request) (url.Values, int64, error) {
	form, err := uiForm(r)
	if err != nil {
		return nil, 0, err
	}
	version, err := formVersion(form)
	return form, version, err
}

// uiConflict is the banner for a save that lost to someone else's: who saved last and
// when come from the page's "last changed" line (already read for the page), else the
// row's own time.
func uiConflict(last *web.Change, version int64, at time.Time, reloadURL string) *web.Conflict {
	c := &web.Conflict{Version: version, At: at, ReloadURL: reloadURL}
	if last != nil {
		c.By, c.At = last.By, last.At
	}
	return c
}

// uiLatestChange returns the newest audit entry about one entity, or nil when the
// log holds none (an entity created before auditing, or whose entries were pruned).
func (s *Server) uiLatestChange(ctx context.Context, entity, id string) (*store.AuditEntry, error) {
	entries, err := s.store.ListAuditFor(ctx, store.AuditFilter{Entity: entity, EntityID: id, Changes: true}, 0, 1)
	if err != nil || len(entries) == 0 {
		return nil, err
	}
	return &entries[0], nil
}

// uiChangeSummary words what a save changed ("glm-5 cap 1 → 2, maxWaitMs 30000 →
// 20000", or for a client key "weight 1 → 3"); "" when nothing did. Bookkeeping
// fields are left out.
func uiChangeSummary(l *web.Localizer, before, after any) string {
	b, errB := json.Marshal(before)
	a, errA := json.Marshal(after)
	if errB != nil || errA != nil {
		return ""
	}
	var parts []string
	for _, d := range web.DiffJSON(b, a) {
		switch d.Path {
		case "version", "updatedAt", "createdAt", "apiKeyPreview", "preview", "lastUsedAt":
			continue
		}
		label := strings.TrimPrefix(strings.TrimPrefix(d.Path, "rateLimitOverrides."), "limits.")
		if m, ok := modelCapPath(label); ok {
			label = l.T("change.modelCap", m)
		}
		switch d.Op {
		case web.DiffAdded:
			parts = append(parts, label+" → "+jsonText(d.After))
		case web.DiffRemoved:
			parts = append(parts, label+" "+l.T("audit.op.removed"))
		default:
			parts = append(parts, label+" "+jsonText(d.Before)+" → "+jsonText(d.After))
		}
	}
	const most = 4
	if len(parts) > most {
		parts = append(parts[:most], "…")
	}
	return strings.Join(parts, ", ")
}

// modelCapPath returns the model of a per-model cap's diff path: web.DiffJSON writes
// "modelConcurrency.glm-5", or `modelConcurrency["glm-4.7"]` for an id with a dot.
func modelCapPath(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, limits.KeyModelConcurrency)
	if !ok {
		return "", false
	}
	if m, ok := strings.CutPrefix(rest, "."); ok && m != "" {
		return m, true
	}
	if q, ok := strings.CutPrefix(rest, "["); ok {
		if q, ok = strings.CutSuffix(q, "]"); ok {
			if m, err := strconv.Unquote(q); err == nil && m != "" {
				return m, true
			}
		}
	}
	return "", false
}

// jsonText shows a compact JSON value plainly: strings unquoted.
func jsonText(v string) string {
	var s string
	if json.Unmarshal([]byte(v), &s) == nil {
		return s
	}
	return v
}
