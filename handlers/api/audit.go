package api

import (
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// ListAudit serves GET /api/v1/audit: entries newest first, limit (1–500, default 50) a
// page; the next page starts after cursor, an entry id taken from nextCursor.
func (s *Server) ListAudit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var (
		errs   limits.FieldErrors
		cursor int64
		limit  = store.DefaultAuditLimit
	)
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, httpkit.FieldError("cursor", httpkit.CodeCursor))
		}
		cursor = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxAuditLimit {
			errs = append(errs, httpkit.FieldError("limit", limits.CodeWholeNumberRange, 1, store.MaxAuditLimit))
		}
		limit = n
	}
	if len(errs) > 0 {
		return &httpkit.APIError{Status: http.StatusBadRequest, Detail: "invalid query parameters", Fields: errs}
	}
	entries, err := s.store.ListAudit(r.Context(), cursor, limit)
	if err != nil {
		return err
	}
	page := list[store.AuditEntry]{Items: entries}
	if page.Items == nil {
		page.Items = []store.AuditEntry{}
	}
	if len(entries) == limit {
		// A full page: say where to go on only if something is there.
		last := entries[len(entries)-1].ID
		more, err := s.store.ListAudit(r.Context(), last, 1)
		if err != nil {
			return err
		}
		if len(more) > 0 {
			page.NextCursor = strconv.FormatInt(last, 10)
		}
	}
	return httpkit.WriteJSON(w, http.StatusOK, page, "")
}
