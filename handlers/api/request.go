package api

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

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
		CacheWriteTokens: r.CacheWriteTokens, CostMicros: r.CostMicros, CostUSD: httpkit.MicrosToUSD(r.CostMicros), TraceID: orNull(r.TraceID), Replica: orNull(r.Replica),
		Session: orNull(r.Session), Affinity: orNull(r.Affinity),
		AttemptsDetail: r.AttemptsDetail, UpstreamError: orNull(r.UpstreamError),
	}
	if r.TTFTMs >= 0 {
		ms := r.TTFTMs
		out.TTFTMs = &ms
	}
	return out
}

// ListRequests serves GET /api/v1/requests: the request log, newest first, filtered.
func (s *Server) ListRequests(w http.ResponseWriter, r *http.Request) error {
	f, errs := httpkit.RequestFilterOf(r.URL.Query())
	if len(errs) > 0 {
		return &httpkit.APIError{Status: http.StatusBadRequest, Detail: "invalid query parameters", Fields: errs}
	}
	rows, next, err := s.store.ListRequests(r.Context(), f)
	if err != nil {
		return err
	}
	page := list[requestJSON]{Items: make([]requestJSON, 0, len(rows)), NextCursor: httpkit.RequestCursor(next)}
	for _, row := range rows {
		page.Items = append(page.Items, requestOf(row))
	}
	return httpkit.WriteJSON(w, http.StatusOK, page, "")
}

// GetRequest serves GET /api/v1/requests/{id}.
func (s *Server) GetRequest(w http.ResponseWriter, r *http.Request) error {
	row, err := s.store.GetRequest(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, requestOf(row), "")
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
		errs = append(errs, httpkit.FieldError("groupBy", limits.CodeOneOf, "key connection model"))
	}
	span, most := 24*time.Hour, maxUsageHourRange
	switch u.Bucket {
	case "hour":
	case "day":
		span, most = 30*24*time.Hour, maxUsageDayRange
	default:
		errs = append(errs, httpkit.FieldError("bucket", limits.CodeOneOf, "hour day"))
	}
	since, ok1 := httpkit.TimeParam(q, "since", &errs)
	until, ok2 := httpkit.TimeParam(q, "until", &errs)
	if ok1 && ok2 {
		if until.IsZero() {
			until = now.UTC()
		}
		if since.IsZero() {
			since = until.Add(-span)
		}
		if !until.After(since) || until.Sub(since) > most {
			errs = append(errs, httpkit.FieldError("until", httpkit.CodeTimeRange))
		}
	}
	u.Since, u.Until = since, until
	return u, errs
}

// GetUsage serves GET /api/v1/usage: the request log summed per bucket and group.
func (s *Server) GetUsage(w http.ResponseWriter, r *http.Request) error {
	q, errs := usageQueryOf(r.URL.Query(), s.now())
	if len(errs) > 0 {
		return &httpkit.APIError{Status: http.StatusBadRequest, Detail: "invalid query parameters", Fields: errs}
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
			CacheHitRatio: u.CacheHitRatio(), CostUSD: httpkit.MicrosToUSD(u.CostMicros)})
	}
	return httpkit.WriteJSON(w, http.StatusOK, out, "")
}
