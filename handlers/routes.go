package handlers

import (
	"net/http"
)

// Handler returns the HTTP handler for every route Gatehouse serves. All routes are
// listed here, in one place.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()

	// Probes and metrics.
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.deps.Metrics != nil {
		mux.Handle("GET /metrics", s.deps.Metrics)
	}

	// Gateway (client keys; OpenAI and Anthropic shapes).
	if s.deps.Gateway != nil {
		mux.Handle("/v1/", s.deps.Gateway)
	}

	return mux
}
