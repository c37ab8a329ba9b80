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

	// REST API (API tokens; JSON and problem+json). The list is below, so tests can
	// walk it and compare it with openapi.yaml.
	api := s.apiRoutes()
	for _, rt := range api {
		mux.Handle(rt.pattern, s.serveAPI(rt))
	}
	mux.Handle(apiPrefix, s.apiFallback(api))

	// Gateway (client keys; OpenAI and Anthropic shapes).
	if s.deps.Gateway != nil {
		mux.Handle("/v1/", s.deps.Gateway)
	}

	return mux
}

// apiRoutes lists every /api/v1 route: pattern, who may call it, handler. Reads take
// any API token, writes an admin token.
func (s *Server) apiRoutes() []apiRoute {
	return []apiRoute{
		{"GET /api/v1/openapi.yaml", accessPublic, s.getOpenAPI},

		{"GET /api/v1/connections", accessRead, s.listConnections},
		{"POST /api/v1/connections", accessWrite, s.createConnection},
		{"GET /api/v1/connections/{id}", accessRead, s.getConnection},
		{"PUT /api/v1/connections/{id}", accessWrite, s.replaceConnection},
		{"PATCH /api/v1/connections/{id}", accessWrite, s.patchConnection},
		{"DELETE /api/v1/connections/{id}", accessWrite, s.deleteConnection},
		{"POST /api/v1/connections/{id}/health/reset", accessWrite, s.resetConnectionHealth},

		{"GET /api/v1/settings", accessRead, s.getSettings},
		{"PATCH /api/v1/settings", accessWrite, s.patchSettings},

		{"GET /api/v1/gates", accessRead, s.getGates},
		{"GET /api/v1/audit", accessRead, s.listAudit},

		{"GET /api/v1/api-tokens", accessRead, s.listAPITokens},
		{"POST /api/v1/api-tokens", accessWrite, s.createAPIToken},
		{"DELETE /api/v1/api-tokens/{id}", accessWrite, s.deleteAPIToken},

		{"GET /api/v1/client-keys", accessRead, s.listClientKeys},
		{"POST /api/v1/client-keys", accessWrite, s.createClientKey},
		{"DELETE /api/v1/client-keys/{id}", accessWrite, s.deleteClientKey},
	}
}
