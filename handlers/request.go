package handlers

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// requestJSON is a request log row as the API shows it: absent values are null.
type requestJSON struct {
	ID             string    `json:"id"`
	StartedAt      time.Time `json:"startedAt"`
	KeyID          *string   `json:"keyId"`
	KeyName        *string   `json:"keyName"`
	ConnectionID   *string   `json:"connectionId"`
	ConnectionName *string   `json:"connectionName"`
	Provider       *string   `json:"provider"`
	Model          *string   `json:"model"`
	UpstreamModel  *string   `json:"upstreamModel"`
	Route          string    `json:"route"`
	Stream         bool      `json:"stream"`
	Status         int       `json:"status"`
	Code           *string   `json:"code"`
	Gate           *string   `json:"gate"`
	Priority       *string   `json:"priority"`
	Attempts       int       `json:"attempts"`
	QueueMs        int       `json:"queueMs"`
	TTFTMs         *int      `json:"ttftMs"`
	UpstreamMs     int       `json:"upstreamMs"`
	TotalMs        int       `json:"totalMs"`
	InputTokens    int64     `json:"inputTokens"`
	OutputTokens   int64     `json:"outputTokens"`
	CachedTokens   int64     `json:"cachedTokens"`
	// CacheWriteTokens is the part of InputTokens written to the prompt
	// cache (CachedTokens the part read from it).
	CacheWriteTokens int64   `json:"cacheWriteTokens"`
	CostMicros       int64   `json:"costMicros"`
	CostUSD          float64 `json:"costUsd"`
	TraceID          *string `json:"traceId"`
	Replica          *string `json:"replica"`
	Session          *string `json:"session"`
	Affinity         *string `json:"affinity"`
	// AttemptsDetail and UpstreamError say why a request failed (store.RequestRow's).
	AttemptsDetail []store.RequestAttempt `json:"attemptsDetail"`
	UpstreamError  *string                `json:"upstreamError"`
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func requestOf(r store.RequestRow) requestJSON {
	out := requestJSON{
		ID: r.ID, StartedAt: r.StartedAt, KeyID: orNull(r.KeyID), KeyName: orNull(r.KeyName),
		ConnectionID: orNull(r.ConnectionID), ConnectionName: orNull(r.ConnectionName), Provider: orNull(r.Provider),
		Model: orNull(r.Model), UpstreamModel: orNull(r.UpstreamModel), Route: r.Route, Stream: r.Stream,
		Status: r.Status, Code: orNull(r.Code), Gate: orNull(r.Gate), Priority: orNull(r.Priority),
		Attempts: r.Attempts, QueueMs: r.QueueMs, UpstreamMs: r.UpstreamMs, TotalMs: r.TotalMs,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CachedTokens: r.CachedTokens,
		CacheWriteTokens: r.CacheWriteTokens, CostMicros: r.CostMicros, CostUSD: microsToUSD(r.CostMicros), TraceID: orNull(r.TraceID), Replica: orNull(r.Replica),
		Session: orNull(r.Session), Affinity: orNull(r.Affinity),
		AttemptsDetail: r.AttemptsDetail, UpstreamError: orNull(r.UpstreamError),
	}
	if r.TTFTMs >= 0 {
		ms := r.TTFTMs
		out.TTFTMs = &ms
	}
	return out
}

// microsToUSD is micro-dollars as dollars.
func microsToUSD(m int64) float64 { return float64(m) / 1e6 }

// Codes of the request log's query problems (words in the catalogs, "validation.<code>").
const (
	codeTimestamp = "timestamp" // not an RFC 3339 time
	codeStatus    = "status"    // not a status (100–599) or a class (1xx–5xx)
	codeTimeRange = "timeRange" // until not after since, or a range too long
	codeSession   = "session"   // not a session hash (16 hex digits)
)

// requestFilterOf reads the request log's filters from a query (the API's and the
// /requests page's): key, connection, model, status, code, since, until, limit and
// cursor. Every bad parameter is reported with its name.
func requestFilterOf(q url.Values) (store.RequestFilter, limits.FieldErrors) {
	var (
		f    store.RequestFilter
		errs limits.FieldErrors
	)
	f.Key, f.Connection = strings.TrimSpace(q.Get("key")), strings.TrimSpace(q.Get("connection"))
	f.Model, f.Code = strings.TrimSpace(q.Get("model")), strings.TrimSpace(q.Get("code"))
	if f.Session = strings.ToLower(strings.TrimSpace(q.Get("session"))); f.Session != "" && !isSessionHash(f.Session) {
		errs = append(errs, fieldError("session", codeSession))
	}
	for _, p := range []struct {
		name string
		v    string
	}{{"key", f.Key}, {"connection", f.Connection}, {"model", f.Model}, {"code", f.Code}} {
		if len(p.v) > 128 {
			errs = append(errs, fieldError(p.name, limits.CodeLengthRange, 0, 128))
		}
	}
	if v := strings.TrimSpace(q.Get("status")); v != "" {
		if class, ok := strings.CutSuffix(strings.ToLower(v), "xx"); ok && len(class) == 1 && class[0] >= '1' && class[0] <= '5' {
			f.StatusClass = int(class[0] - '0')
		} else if n, err := strconv.Atoi(v); err == nil && n >= 100 && n <= 599 {
			f.Status = n
		} else {
			errs = append(errs, fieldError("status", codeStatus))
		}
	}
	var ok bool
	if f.Since, ok = timeParam(q, "since", &errs); ok {
		if f.Until, ok = timeParam(q, "until", &errs); ok && !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
			errs = append(errs, fieldError("until", codeTimeRange))
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxRequestPage {
			errs = append(errs, fieldError("limit", limits.CodeWholeNumberRange, 1, store.MaxRequestPage))
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, ok := parseRequestCursor(v)
		if !ok {
			errs = append(errs, fieldError("cursor", codeCursor))
		}
		f.After = c
	}
	return f, errs
}

// isSessionHash reports whether v is a session as stored: 16 lower-case hex digits.
func isSessionHash(v string) bool {
	if len(v) != 16 {
		return false
	}
	for _, c := range []byte(v) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// timeParam reads an RFC 3339 time (zero when absent); ok is false when it is bad
// (then an error is added).
func timeParam(q url.Values, name string, errs *limits.FieldErrors) (time.Time, bool) {
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		*errs = append(*errs, fieldError(name, codeTimestamp))
		return time.Time{}, false
	}
	return t.UTC(), true
}

// requestCursor encodes a row's place for nextCursor: opaque, URL-safe.
func requestCursor(c *store.RequestCursor) string {
	if c == nil {
		return ""
	}
	raw := strconv.FormatInt(c.StartedAt.UnixMicro(), 10) + "." + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseRequestCursor(v string) (*store.RequestCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, false
	}
	ts, id, ok := strings.Cut(string(raw), ".")
	us, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil || len(id) != 36 {
		return nil, false
	}
	return &store.RequestCursor{StartedAt: time.UnixMicro(us).UTC(), ID: id}, true
}

// listRequests serves GET /api/v1/requests: the request log, newest first, filtered.
func (s *Server) listRequests(w http.ResponseWriter, r *http.Request) error {
	f, errs := requestFilterOf(r.URL.Query())
	if len(errs) > 0 {
		return &apiError{status: http.StatusBadRequest, detail: "invalid query parameters", fields: errs}
	}
	rows, next, err := s.store.ListRequests(r.Context(), f)
	if err != nil {
		return err
	}
	page := list[requestJSON]{Items: make([]requestJSON, 0, len(rows)), NextCursor: requestCursor(next)}
	for _, row := range rows {
		page.Items = append(page.Items, requestOf(row))
	}
	return writeJSON(w, http.StatusOK, page, "")
}

// getRequest serves GET /api/v1/requests/{id}.
func (s *Server) getRequest(w http.ResponseWriter, r *http.Request) error {
	row, err := s.store.GetRequest(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, requestOf(row), "")
}

// usageJSON is one row of GET /api/v1/usage.
type usageJSON struct {
	Bucket       time.Time `json:"bucket"`
	Group        string    `json:"group"`
	GroupID      *string   `json:"groupId"`
	Requests     int64     `json:"requests"`
	Errors       int64     `json:"errors"`
	Rejected     int64     `json:"rejected"`
	InputTokens  int64     `json:"inputTokens"`
	OutputTokens int64     `json:"outputTokens"`
	// CachedTokens and CacheWriteTokens are the parts of InputTokens read
	// from and written to the prompt cache; CacheHitRatio is reads ÷ input.
	CachedTokens     int64   `json:"cachedTokens"`
	CacheWriteTokens int64   `json:"cacheWriteTokens"`
	CacheHitRatio    float64 `json:"cacheHitRatio"`
	CostUSD          float64 `json:"costUsd"`
}

// Bounds of a usage query: buckets per answer stay in the hundreds.
const (
	maxUsageHourRange = 31 * 24 * time.Hour
	maxUsageDayRange  = 366 * 24 * time.Hour
)

// usageQueryOf reads a usage query (groupBy, bucket, since, until, key, connection),
// with defaults: groupBy key, bucket hour, until now, since 24 hours (hour buckets)
// or 30 days (day buckets) before until.
func usageQueryOf(q url.Values, now time.Time) (store.UsageQuery, limits.FieldErrors) {
	var errs limits.FieldErrors
	u := store.UsageQuery{GroupBy: q.Get("groupBy"), Bucket: q.Get("bucket"),
		Key: strings.TrimSpace(q.Get("key")), Connection: strings.TrimSpace(q.Get("connection"))}
	if u.GroupBy == "" {
		u.GroupBy = "key"
	}
	if u.Bucket == "" {
		u.Bucket = "hour"
	}
	if u.GroupBy != "key" && u.GroupBy != "connection" && u.GroupBy != "model" {
		errs = append(errs, fieldError("groupBy", limits.CodeOneOf, "key connection model"))
	}
	span, most := 24*time.Hour, maxUsageHourRange
	switch u.Bucket {
	case "hour":
	case "day":
		span, most = 30*24*time.Hour, maxUsageDayRange
	default:
		errs = append(errs, fieldError("bucket", limits.CodeOneOf, "hour day"))
	}
	since, ok1 := timeParam(q, "since", &errs)
	until, ok2 := timeParam(q, "until", &errs)
	if ok1 && ok2 {
		if until.IsZero() {
			until = now.UTC()
		}
		if since.IsZero() {
			since = until.Add(-span)
		}
		if !until.After(since) || until.Sub(since) > most {
			errs = append(errs, fieldError("until", codeTimeRange))
		}
	}
	u.Since, u.Until = since, until
	return u, errs
}

// getUsage serves GET /api/v1/usage: the request log summed per bucket and group.
func (s *Server) getUsage(w http.ResponseWriter, r *http.Request) error {
	q, errs := usageQueryOf(r.URL.Query(), s.now())
	if len(errs) > 0 {
		return &apiError{status: http.StatusBadRequest, detail: "invalid query parameters", fields: errs}
	}
	rows, err := s.store.RequestUsage(r.Context(), q)
	if err != nil {
		return err
	}
	out := struct {
		Rows []usageJSON `json:"rows"`
	}{Rows: make([]usageJSON, 0, len(rows))}
	for _, u := range rows {
		out.Rows = append(out.Rows, usageJSON{Bucket: u.Bucket, Group: u.Group, GroupID: orNull(u.GroupID),
			Requests: u.Requests, Errors: u.Errors, Rejected: u.Rejected, InputTokens: u.InputTokens,
			OutputTokens: u.OutputTokens, CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens,
			CacheHitRatio: u.CacheHitRatio(), CostUSD: microsToUSD(u.CostMicros)})
	}
	return writeJSON(w, http.StatusOK, out, "")
}
