package ui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// auditPageSize is how many entries one audit page shows.
const auditPageSize = 50

// Audit serves GET /audit: newest first, auditPageSize a page, paged with
// ?before=<entry id>, filtered by actor (an e-mail or a recorded actor), entity
// (and id), action and time (since, until: RFC 3339); every filter is kept on the
// next page's link.
func (s *Server) Audit(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	q := r.URL.Query()
	before, err := strconv.ParseInt(q.Get("before"), 10, 64)
	if err != nil || before < 0 {
		before = 0
	}
	v := web.AuditList{Errors: web.FieldErrors{}, Entities: web.AuditEntities, Actions: web.AuditActions,
		Filter: web.AuditFilter{Actor: strings.TrimSpace(q.Get("actor")), Entity: q.Get("entity"), EntityID: q.Get("id"),
			Action: q.Get("action"), Since: q.Get("since"), Until: q.Get("until")}}
	f := store.AuditFilter{Actor: v.Filter.Actor, Entity: v.Filter.Entity, EntityID: v.Filter.EntityID, Action: v.Filter.Action}
	var errs limits.FieldErrors
	f.Since, _ = httpkit.TimeParam(q, "since", &errs)
	f.Until, _ = httpkit.TimeParam(q, "until", &errs)
	if len(errs) > 0 {
		uiAddErrors(rq.l, v.Errors, errs)
		return s.uiRender(w, r, rq, http.StatusUnprocessableEntity, web.AuditPage(s.uiPage(r, rq), v))
	}
	// One row more than a page tells whether an older page exists.
	rows, err := s.store.ListAuditFor(r.Context(), f, before, auditPageSize+1)
	if err != nil {
		return err
	}
	more := len(rows) > auditPageSize
	rows = rows[:min(len(rows), auditPageSize)]
	var cursor int64
	for _, e := range rows {
		cursor = e.ID
		v.Entries = append(v.Entries, auditEntry(e))
	}
	params := url.Values{}
	for _, k := range []string{"actor", "entity", "id", "action", "since", "until"} {
		if val := strings.TrimSpace(q.Get(k)); val != "" {
			params.Set(k, val)
		}
	}
	if more && cursor > 0 {
		older := url.Values{}
		for k, vs := range params {
			older[k] = vs
		}
		older.Set("before", strconv.FormatInt(cursor, 10))
		v.OlderURL = "/audit?" + older.Encode()
	}
	if before > 0 {
		v.NewestURL = "/audit"
		if len(params) > 0 {
			v.NewestURL += "?" + params.Encode()
		}
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.AuditPage(s.uiPage(r, rq), v))
}

// auditEntry turns a stored audit row into the page's entry, its change diffed.
func auditEntry(e store.AuditEntry) web.AuditEntry {
	return web.AuditEntry{
		ID: strconv.FormatInt(e.ID, 10), At: e.CreatedAt, Actor: e.Actor, Action: e.Action,
		Entity: e.Entity, EntityID: e.EntityID,
		EntityName: auditName(e.After, e.Before),
		Diff:       web.DiffJSON(orEmpty(e.Before), orEmpty(e.After)),
	}
}

// auditName finds a readable name for the entity in its JSON (name or email).
func auditName(docs ...json.RawMessage) string {
	for _, d := range docs {
		var m struct {
			Name  string `json:"name"`
			Email string `json:"email"`
		}
		if len(d) == 0 || json.Unmarshal(d, &m) != nil {
			continue
		}
		if m.Name != "" {
			return m.Name
		}
		if m.Email != "" {
			return m.Email
		}
	}
	return ""
}

// orEmpty is an absent document as an empty object, so a creation diffs as
// "added" and a deletion as "removed".
func orEmpty(d json.RawMessage) []byte {
	if len(d) == 0 {
		return []byte("{}")
	}
	return d
}
