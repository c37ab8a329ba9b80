package handlers

import (
	"net/http"
)

// healthz answers 200 while the process is up.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers 200 once a gateway config has been loaded (also while the database is
// away, saying how stale the config is) and 503 before that.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	ok, detail := true, "ready"
	if s.deps.Ready != nil {
		ok, detail = s.deps.Ready()
	}
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(detail + "\n"))
}
