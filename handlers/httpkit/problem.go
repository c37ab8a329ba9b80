package httpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// ProblemContentType is the media type of the API's error bodies (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is an RFC 9457 problem details object, the body of every API error. Type is
// always "about:blank", so Title is the status phrase; Detail says what went wrong in
// words meant for the client, and Errors lists every field problem with its path. Errors
// is always present (an empty array when no field is to blame), so clients can read
// errors[] on every status without checking for its presence first.
type Problem struct {
	Type   string             `json:"type"`
	Title  string             `json:"title"`
	Status int                `json:"status"`
	Detail string             `json:"detail,omitempty"`
	Errors limits.FieldErrors `json:"errors"`
}

// APIError is an error the API reports as it is: its status, a detail for the client,
// the field problems, and headers to send with it (WWW-Authenticate, Allow).
type APIError struct {
	Status int
	Detail string
	Fields limits.FieldErrors
	Header http.Header
}

func (e *APIError) Error() string {
	if len(e.Fields) > 0 {
		return fmt.Sprintf("handlers: %d %s: %s", e.Status, e.Detail, e.Fields.Error())
	}
	return fmt.Sprintf("handlers: %d %s", e.Status, e.Detail)
}

// NewAPIError returns an apiError with status and detail.
func NewAPIError(status int, detail string) *APIError {
	return &APIError{Status: status, Detail: detail}
}

// ErrPreconditionFailed is the answer to a write whose If-Match does not match.
func ErrPreconditionFailed() *APIError {
	return NewAPIError(http.StatusPreconditionFailed,
		"If-Match does not match the current version; GET the resource and retry with its ETag")
}

// problemFor maps an error to the problem the client sees. It is the only place that
// gives errors a status: store sentinels, limits.FieldErrors, body-size errors and
// apiError. unexpected reports errors whose text the client must not see and that
// should be logged.
func problemFor(err error) (p Problem, header http.Header, unexpected bool) {
	var (
		ae     *APIError
		fe     limits.FieldErrors
		tooBig *http.MaxBytesError
	)
	status, detail := http.StatusInternalServerError, "an unexpected error occurred; it has been logged"
	switch {
	case errors.As(err, &ae):
		status, detail, header = ae.Status, ae.Detail, ae.Header
		fe = ae.Fields
	case errors.As(err, &fe) && len(fe) > 0:
		status, detail = http.StatusUnprocessableEntity, "the request has invalid fields"
	case IsBodyTimeout(err):
		status, detail = http.StatusRequestTimeout, "the request body did not arrive in time"
	case errors.As(err, &tooBig):
		status = http.StatusRequestEntityTooLarge
		detail = "the request body is larger than " + strconv.FormatInt(tooBig.Limit, 10) + " bytes"
	case errors.Is(err, store.ErrNotFound):
		status, detail = http.StatusNotFound, "no such resource"
	case errors.Is(err, store.ErrStale):
		return problemFor(ErrPreconditionFailed())
	case errors.Is(err, store.ErrConflict):
		status, detail = http.StatusConflict, "the request conflicts with an existing resource"
	case errors.Is(err, store.ErrUnavailable):
		// The gateway keeps serving on its last config; configuration waits for the database.
		status, detail, unexpected = http.StatusServiceUnavailable, "the database is unavailable; try again shortly", true
		header = http.Header{"Retry-After": []string{RetryAfterUnavailable}}
	case errors.Is(err, store.ErrInvalid):
		// The handlers validate before writing, so this is a gap worth a log line.
		status, detail, unexpected = http.StatusUnprocessableEntity, "the database rejected a value", true
	default:
		unexpected = true
	}
	if fe == nil {
		fe = limits.FieldErrors{}
	}
	return Problem{
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
		Errors: fe,
	}, header, unexpected
}

// RetryAfterUnavailable is the Retry-After (seconds) of a 503 for a database that
// is away, from the API and the dashboard alike.
const RetryAfterUnavailable = "5"

// WriteProblem answers r with the problem for err, logging unexpected errors once
// (never the request body: only method, route and the error chain).
func (s *Core) WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	p, header, unexpected := problemFor(err)
	if unexpected {
		if r.Context().Err() != nil {
			// The client went away; nobody reads the answer.
			s.log.Debug("api request abandoned", slog.String("method", r.Method),
				slog.String("route", r.Pattern), slog.Any("error", err))
			return
		}
		s.log.Error("api request failed", slog.String("method", r.Method),
			slog.String("route", r.Pattern), slog.Int("status", p.Status), slog.Any("error", err))
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(p); err != nil {
		// A problem of strings and ints always encodes.
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	for k, vs := range header {
		h[k] = vs
	}
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Del("ETag")
	w.WriteHeader(p.Status)
	_, _ = w.Write(buf.Bytes())
}
