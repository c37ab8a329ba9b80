package handlers

import (
	"net/http"
	"net/http/pprof"
)

// pprofPrefix starts every profiling path.
const pprofPrefix = "/debug/pprof/"

// pprofRoute is one profiling endpoint: its ServeMux pattern and handler.
type pprofRoute struct {
	pattern string
	handler http.HandlerFunc
}

// pprofRoutes lists the runtime profiling endpoints of net/http/pprof. The index
// also serves the named profiles (/debug/pprof/heap, /allocs, /goroutine, …).
func pprofRoutes() []pprofRoute {
	return []pprofRoute{
		{"GET " + pprofPrefix, pprof.Index},
		{"GET " + pprofPrefix + "cmdline", pprof.Cmdline},
		{"GET " + pprofPrefix + "profile", pprof.Profile},
		{"GET " + pprofPrefix + "symbol", pprof.Symbol},
		{"POST " + pprofPrefix + "symbol", pprof.Symbol},
		{"GET " + pprofPrefix + "trace", pprof.Trace},
	}
}

// handlePprof registers the profiling endpoints on mux. Profiles expose the
// command line, memory contents by type and timings, so every one of them needs an
// admin API token: a missing or unknown token gets 401 and a viewer's token 403, as
// problem+json like the rest of the API.
func (s *Server) handlePprof(mux *http.ServeMux) {
	for _, rt := range pprofRoutes() {
		mux.Handle(rt.pattern, s.adminOnly(rt.handler))
	}
}

// adminOnly serves h to callers with an admin API token only.
func (s *Server) adminOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.core.Authenticate(r, accessWrite); err != nil {
			s.core.WriteProblem(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
