package ui

import (
	"bytes"
	"encoding/csv"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// requestsPageSize is how many requests one /requests page shows.
const requestsPageSize = 50

// Requests serves GET /requests: the request log, newest first, filtered by the
// same query parameters as GET /api/v1/requests, paged with its cursor.
func (s *Server) Requests(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	q := r.URL.Query()
	v := web.RequestList{Errors: web.FieldErrors{}, Filter: web.RequestFilter{
		Key: q.Get("key"), Connection: q.Get("connection"), Model: q.Get("model"), Status: q.Get("status"),
		Code: q.Get("code"), Since: q.Get("since"), Until: q.Get("until"), Session: q.Get("session"), Last: q.Get("last"),
	}}
	for _, l := range requestLasts {
		v.Lasts = append(v.Lasts, web.Option{Value: l.name, Label: rq.l.T("requests.last." + l.name)})
	}
	keys, err := s.store.ListClientKeys(r.Context())
	if err != nil {
		return err
	}
	for _, k := range keys {
		v.Keys = append(v.Keys, web.Option{Value: k.ID, Label: k.Name})
	}
	conns, err := s.store.ListConnections(r.Context())
	if err != nil {
		return err
	}
	for _, c := range conns {
		v.Connections = append(v.Connections, web.Option{Value: c.ID, Label: c.Name})
	}
	f, errs := uiRequestFilter(q, rq.now)
	status := http.StatusOK
	if len(errs) > 0 {
		uiAddErrors(rq.l, v.Errors, errs)
		status = http.StatusUnprocessableEntity
	} else {
		f.Limit = requestsPageSize
		rows, next, err := s.store.ListRequests(r.Context(), f)
		if err != nil {
			return err
		}
		for _, row := range rows {
			v.Rows = append(v.Rows, requestRowView(row))
		}
		params := filterParams(q)
		if next != nil {
			older := cloneValues(params)
			older.Set("cursor", httpkit.RequestCursor(next))
			v.NextURL = "/requests?" + older.Encode()
		}
		if f.After != nil {
			v.FirstURL = "/requests"
			if len(params) > 0 {
				v.FirstURL += "?" + params.Encode()
			}
		}
		v.CSVURL = "/requests.csv"
		if len(params) > 0 {
			v.CSVURL += "?" + params.Encode()
		}
		if f.After == nil { // the newest page follows new requests; an older one stays put
			v.LiveURL, v.LiveIntervalMs = "/requests/live", liveInterval
			if len(params) > 0 {
				v.LiveURL += "?" + params.Encode()
			}
		}
	}
	return s.uiRender(w, r, rq, status, web.RequestsPage(s.uiPage(r, rq), v))
}

// RequestsLive serves GET /requests/live?<filters>: the newest page's rows as
// HTML (RequestRows), for the list's live poll to put in place.
func (s *Server) RequestsLive(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	f, errs := uiRequestFilter(r.URL.Query(), rq.now)
	if len(errs) > 0 {
		return &uiStatus{status: http.StatusBadRequest, key: "status.other"}
	}
	f.Limit, f.After = requestsPageSize, nil
	rows, _, err := s.store.ListRequests(r.Context(), f)
	if err != nil {
		return err
	}
	views := make([]web.RequestRow, 0, len(rows))
	for _, row := range rows {
		views = append(views, requestRowView(row))
	}
	if err := s.dash.sessions.Write(r, w, rq.sess); err != nil {
		return err
	}
	frags, err := s.renderFragments(r.Context(), map[string]templ.Component{"requests": web.RequestRows(s.uiPage(r, rq), views)})
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, struct {
		Fragments map[string]string `json:"fragments"`
	}{frags}, "")
}

// requestLasts are the dashboard's relative time ranges: the last 15 minutes, hour,
// day or week, up to now.
var requestLasts = []struct {
	name string
	span time.Duration
}{{"15m", 15 * time.Minute}, {"1h", time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}}

// uiRequestFilter is requestFilterOf with the dashboard's "last" range: since is
// now less the range, or the since typed when that is later (both narrow the list).
func uiRequestFilter(q url.Values, now time.Time) (store.RequestFilter, limits.FieldErrors) {
	f, errs := httpkit.RequestFilterOf(q)
	last := q.Get("last")
	if last == "" {
		return f, errs
	}
	i := slices.IndexFunc(requestLasts, func(l struct {
		name string
		span time.Duration
	}) bool {
		return l.name == last
	})
	if i < 0 {
		return f, append(errs, httpkit.FieldError("last", limits.CodeOneOf, "15m, 1h, 24h, 7d"))
	}
	if since := now.Add(-requestLasts[i].span); f.Since.IsZero() || since.After(f.Since) {
		f.Since = since
	}
	return f, errs
}

// filterParams keeps the filter parameters of q that are set (no cursor, no limit).
func filterParams(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range []string{"key", "connection", "model", "status", "code", "session", "since", "until", "last"} {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out
}

func cloneValues(v url.Values) url.Values {
	out := make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func requestRowView(r store.RequestRow) web.RequestRow {
	return web.RequestRow{Row: r}
}

// Request serves GET /requests/{id}.
func (s *Server) Request(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	row, err := s.store.GetRequest(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	v := requestRowView(row)
	if row.UpstreamModel != "" {
		st, err := s.store.GetSettings(r.Context())
		if err != nil {
			return err
		}
		settings, _ := limits.NormalizeSettings(st.Data)
		v.Rate = settings.Prices.Lookup(row.Provider, row.UpstreamModel)
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.RequestPage(s.uiPage(r, rq), v))
}

// RequestsCSV serves GET /requests.csv: every row of a filter, newest first,
// streamed a page at a time through the keyset cursor (no cap, nothing held whole).
// An error on the first page is an error page; after the download has started it
// ends the download short, and is logged.
func (s *Server) RequestsCSV(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	f, errs := uiRequestFilter(r.URL.Query(), rq.now)
	if len(errs) > 0 {
		return &uiStatus{status: http.StatusBadRequest, key: "status.other"}
	}
	f.Limit = store.MaxRequestPage
	rows, cur, err := s.store.ListRequests(r.Context(), f)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="requests.csv"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	cw := csv.NewWriter(w)
	write := func(row []string) {
		for i, c := range row {
			row[i] = CSVCell(c)
		}
		_ = cw.Write(row) // a write error shows in cw.Error
	}
	write([]string{"id", "started_at", "key", "connection", "provider", "model", "upstream_model", "route",
		"stream", "status", "code", "gate", "attempts", "queue_ms", "ttft_ms", "upstream_ms", "total_ms",
		"input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "cost_usd", "trace_id", "replica"})
	for {
		for _, x := range rows {
			ttft := ""
			if x.TTFTMs >= 0 {
				ttft = strconv.Itoa(x.TTFTMs)
			}
			write([]string{x.ID, x.StartedAt.Format(time.RFC3339Nano), x.KeyName, x.ConnectionName,
				x.Provider, x.Model, x.UpstreamModel, x.Route, strconv.FormatBool(x.Stream), strconv.Itoa(x.Status),
				x.Code, x.Gate, strconv.Itoa(x.Attempts), strconv.Itoa(x.QueueMs), ttft, strconv.Itoa(x.UpstreamMs),
				strconv.Itoa(x.TotalMs), strconv.FormatInt(x.InputTokens, 10), strconv.FormatInt(x.OutputTokens, 10),
				strconv.FormatInt(x.CachedTokens, 10), strconv.FormatInt(x.CacheWriteTokens, 10),
				strconv.FormatFloat(httpkit.MicrosToUSD(x.CostMicros), 'f', -1, 64), x.TraceID, x.Replica})
		}
		cw.Flush()
		if cw.Error() != nil || cur == nil {
			return nil // a client gone mid-download has nothing left to be told
		}
		f.After = cur
		if rows, cur, err = s.store.ListRequests(r.Context(), f); err != nil {
			if r.Context().Err() == nil {
				s.log.Error("requests CSV cut short", slog.Any("error", err))
			}
			return nil
		}
	}
}

// CSVCell makes c safe for a spreadsheet: a cell starting with =, +, -, @, a tab or
// a carriage return would be read as a formula (or start one), so it gets a leading
// ' — every such cell, a negative number's too.
func CSVCell(c string) string {
	if c != "" && strings.IndexByte("=+-@\t\r", c[0]) >= 0 {
		return "'" + c
	}
	return c
}

// writeCSV renders rows to a buffer and sends them as a download named name, each
// cell through CSVCell.
func writeCSV(w http.ResponseWriter, name string, rows [][]string) error {
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	for _, row := range rows {
		for i, c := range row {
			row[i] = CSVCell(c)
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(buf.Bytes())
	return err
}
