package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
)

// Prefix starts every REST API path.
const Prefix = "/api/v1/"

// Handler serves one API endpoint. It renders its whole response (writeJSON,
// writeNoContent) and returns nil, or returns an error without having written
// anything; Serve maps the error to a problem+json answer.
type Handler func(w http.ResponseWriter, r *http.Request) error

// Route is one /api/v1 endpoint: its ServeMux pattern ("METHOD /api/v1/…"), what it
// requires of the caller, and its handler.
type Route struct {
	Pattern string
	Access  httpkit.Access
	Handler Handler
}

// Serve wraps an API route: it authenticates the caller (unless the route is
// public), checks the role, runs the handler and maps its error to a problem.
func (s *Server) Serve(rt Route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.Access != httpkit.AccessPublic {
			tok, err := s.Authenticate(r, rt.Access)
			if err != nil {
				s.WriteProblem(w, r, err)
				return
			}
			r = r.WithContext(httpkit.WithToken(r.Context(), tok))
		}
		if err := rt.Handler(w, r); err != nil {
			s.WriteProblem(w, r, err)
		}
	})
}

// Fallback answers requests under /api/v1/ that no route takes: 405 with an Allow
// header when the path exists with other methods, else 404, both as problem+json (the
// ServeMux's own answers are plain text).
func (s *Server) Fallback(routes []Route) http.Handler {
	probe := http.NewServeMux()
	allowed := map[string][]string{}
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt.Pattern, " ")
		if _, ok := allowed[path]; !ok {
			probe.Handle(path, http.NotFoundHandler())
		}
		allowed[path] = append(allowed[path], method)
		if method == http.MethodGet {
			allowed[path] = append(allowed[path], http.MethodHead)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := probe.Handler(r); pattern != "" && pattern != Prefix {
			methods := slices.Sorted(slices.Values(allowed[pattern]))
			s.WriteProblem(w, r, &httpkit.APIError{
				Status: http.StatusMethodNotAllowed,
				Detail: "this resource does not support " + r.Method,
				Header: http.Header{"Allow": {strings.Join(methods, ", ")}},
			})
			return
		}
		s.WriteProblem(w, r, httpkit.NewAPIError(http.StatusNotFound, "no such API endpoint"))
	})
}

// list is the envelope of every collection: the items and, when there are more, the
// cursor of the next page.
type list[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// writeNoContent answers 204.
func writeNoContent(w http.ResponseWriter) error {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// etag is the strong entity tag of a version: "<version>".
func etag(version int64) string {
	return `"` + strconv.FormatInt(version, 10) + `"`
}

// ifMatch is a parsed If-Match header.
type ifMatch struct {
	present bool
	any     bool    // "*": any existing representation matches
	tags    []int64 // the versions named by strong entity tags
}

// parseIfMatch reads r's If-Match. Weak tags and tags that are not one of our versions
// are kept out of tags: under strong comparison they never match.
func parseIfMatch(r *http.Request) ifMatch {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return ifMatch{}
	}
	m := ifMatch{present: true}
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" {
				m.any = true
				continue
			}
			if len(t) < 3 || t[0] != '"' || t[len(t)-1] != '"' {
				continue
			}
			if n, err := strconv.ParseInt(t[1:len(t)-1], 10, 64); err == nil && n > 0 {
				m.tags = append(m.tags, n)
			}
		}
	}
	return m
}

// matches reports whether a resource at version passes the precondition.
func (m ifMatch) matches(version int64) bool {
	return !m.present || m.any || slices.Contains(m.tags, version)
}

// expected is the version to hand to the store, whose check runs inside the write's
// transaction: the one version named, else 0 (no check by the store; callers that pass
// 0 with a present precondition check matches under the row lock themselves).
func (m ifMatch) expected() int64 {
	if m.present && !m.any && len(m.tags) == 1 {
		return m.tags[0]
	}
	return 0
}
