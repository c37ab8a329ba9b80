package httpkit

import (
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// MicrosToUSD is micro-dollars as dollars.
func MicrosToUSD(m int64) float64 { return float64(m) / 1e6 }

// Codes of the request log's query problems (words in the catalogs, "validation.<code>").
const (
	codeTimestamp = "timestamp" // not an RFC 3339 time
	codeStatus    = "status"    // not a status (100–599) or a class (1xx–5xx)
	CodeTimeRange = "timeRange" // until not after since, or a range too long
	codeSession   = "session"   // not a session hash (16 hex digits)
)

// RequestFilterOf reads the request log's filters from a query (the API's and the
// /requests page's): key, connection, model, status, code, since, until, limit and
// cursor. Every bad parameter is reported with its name.
func RequestFilterOf(q url.Values) (store.RequestFilter, limits.FieldErrors) {
	var (
		f    store.RequestFilter
		errs limits.FieldErrors
	)
	f.Key, f.Connection = strings.TrimSpace(q.Get("key")), strings.TrimSpace(q.Get("connection"))
	f.Model, f.Code = strings.TrimSpace(q.Get("model")), strings.TrimSpace(q.Get("code"))
	if f.Session = strings.ToLower(strings.TrimSpace(q.Get("session"))); f.Session != "" && !isSessionHash(f.Session) {
		errs = append(errs, FieldError("session", codeSession))
	}
	for _, p := range []struct {
		name string
		v    string
	}{{"key", f.Key}, {"connection", f.Connection}, {"model", f.Model}, {"code", f.Code}} {
		if len(p.v) > 128 {
			errs = append(errs, FieldError(p.name, limits.CodeLengthRange, 0, 128))
		}
	}
	if v := strings.TrimSpace(q.Get("status")); v != "" {
		if class, ok := strings.CutSuffix(strings.ToLower(v), "xx"); ok && len(class) == 1 && class[0] >= '1' && class[0] <= '5' {
			f.StatusClass = int(class[0] - '0')
		} else if n, err := strconv.Atoi(v); err == nil && n >= 100 && n <= 599 {
			f.Status = n
		} else {
			errs = append(errs, FieldError("status", codeStatus))
		}
	}
	var ok bool
	if f.Since, ok = TimeParam(q, "since", &errs); ok {
		if f.Until, ok = TimeParam(q, "until", &errs); ok && !f.Since.IsZero() && !f.Until.IsZero() && !f.Until.After(f.Since) {
			errs = append(errs, FieldError("until", CodeTimeRange))
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxRequestPage {
			errs = append(errs, FieldError("limit", limits.CodeWholeNumberRange, 1, store.MaxRequestPage))
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		c, ok := parseRequestCursor(v)
		if !ok {
			errs = append(errs, FieldError("cursor", CodeCursor))
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

// TimeParam reads an RFC 3339 time (zero when absent); ok is false when it is bad
// (then an error is added).
func TimeParam(q url.Values, name string, errs *limits.FieldErrors) (time.Time, bool) {
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		*errs = append(*errs, FieldError(name, codeTimestamp))
		return time.Time{}, false
	}
	return t.UTC(), true
}

// RequestCursor encodes a row's place for nextCursor: opaque, URL-safe.
func RequestCursor(c *store.RequestCursor) string {
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
