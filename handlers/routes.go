package handlers

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/static"
)

// Handler returns the HTTP handler for every route Gatehouse serves. All routes are
// listed here, in one place.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()

	// Probes and metrics.
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.deps.Metrics != nil {
		// Connection names, ids, models, caps and health: for API tokens only.
		mux.Handle("GET /metrics", s.requireToken(s.deps.Metrics))
	}

	// REST API (API tokens; JSON and problem+json). The list is below, so tests can
	// walk it and compare it with openapi.yaml.
	api := s.apiRoutes()
	for _, rt := range api {
		mux.Handle(rt.pattern, s.serveAPI(rt))
	}
	mux.Handle(apiPrefix, s.apiFallback(api))

	// Dashboard (session cookies; HTML). s.ui checks the session and the role and
	// refuses cross-origin writes (http.CrossOriginProtection) with 403.
	mux.Handle("GET "+static.Prefix, static.Compressed(s.dash.assets.Handler()))
	mux.Handle("GET /login", s.ui(uiPublic, s.uiLoginForm))
	mux.Handle("POST /login", s.ui(uiPublic, s.uiLogin))
	mux.Handle("GET /logout", s.ui(uiPublic, s.uiLogoutPage))
	mux.Handle("POST /logout", s.ui(uiPublic, s.uiLogout))
	mux.Handle("GET /{$}", s.ui(uiRead, s.uiOverview))
	mux.Handle("GET /live", s.ui(uiRead, s.uiLive))
	mux.Handle("GET /connections", s.ui(uiRead, s.uiConnections))
	mux.Handle("GET /connections/new", s.ui(uiWrite, s.uiNewConnection))
	mux.Handle("POST /connections/new", s.ui(uiWrite, s.uiCreateConnection))
	mux.Handle("GET /connections/{id}", s.ui(uiRead, s.uiEditConnection))
	mux.Handle("POST /connections/{id}", s.ui(uiWrite, s.uiSaveConnection))
	mux.Handle("POST /connections/{id}/toggle", s.ui(uiWrite, s.uiToggleConnection))
	mux.Handle("POST /connections/{id}/test", s.ui(uiWrite, s.uiTestConnection))
	mux.Handle("GET /connections/{id}/delete", s.ui(uiWrite, s.uiConfirmDeleteConnection))
	mux.Handle("POST /connections/{id}/delete", s.ui(uiWrite, s.uiDeleteConnection))
	mux.Handle("GET /settings", s.ui(uiRead, s.uiSettings))
	mux.Handle("POST /settings", s.ui(uiWrite, s.uiSaveSettings))
	mux.Handle("GET /keys", s.ui(uiRead, s.uiKeys(kindKeys)))
	mux.Handle("POST /keys", s.ui(uiWrite, s.uiCreateKey(kindKeys)))
	mux.Handle("GET /keys/{id}", s.ui(uiRead, s.uiEditKey))
	mux.Handle("POST /keys/{id}", s.ui(uiWrite, s.uiSaveKey))
	mux.Handle("GET /keys/{id}/revoke", s.ui(uiWrite, s.uiConfirmRevoke(kindKeys)))
	mux.Handle("POST /keys/{id}/revoke", s.ui(uiWrite, s.uiRevoke(kindKeys)))
	mux.Handle("GET /tokens", s.ui(uiRead, s.uiKeys(kindTokens)))
	mux.Handle("POST /tokens", s.ui(uiWrite, s.uiCreateKey(kindTokens)))
	mux.Handle("GET /tokens/{id}/revoke", s.ui(uiWrite, s.uiConfirmRevoke(kindTokens)))
	mux.Handle("POST /tokens/{id}/revoke", s.ui(uiWrite, s.uiRevoke(kindTokens)))
	mux.Handle("GET /audit", s.ui(uiRead, s.uiAudit))
	mux.Handle("GET /requests", s.ui(uiRead, s.uiRequests))
	mux.Handle("GET /requests.csv", s.ui(uiRead, s.uiRequestsCSV))
	mux.Handle("GET /requests/live", s.ui(uiRead, s.uiRequestsLive))
	mux.Handle("GET /requests/{id}", s.ui(uiRead, s.uiRequest))
	mux.Handle("GET /sessions", s.ui(uiRead, s.uiSessions))
	mux.Handle("GET /sessions/live", s.ui(uiRead, s.uiSessionsLive))
	mux.Handle("POST /sessions/{session}/stop", s.ui(uiWrite, s.uiStopSession))
	mux.Handle("POST /sessions/{session}/resume", s.ui(uiWrite, s.uiResumeSession))
	mux.Handle("GET /alerts", s.ui(uiRead, s.uiAlerts))
	mux.Handle("GET /alerts/live", s.ui(uiRead, s.uiAlertsLive))
	mux.Handle("POST /alerts/{webhook}/test", s.ui(uiWrite, s.uiTestAlert))
	mux.Handle("GET /usage", s.ui(uiRead, s.uiUsage))
	mux.Handle("GET /usage.csv", s.ui(uiRead, s.uiUsageCSV))
	mux.Handle("GET /usage/live", s.ui(uiRead, s.uiUsageLive))
	mux.Handle("GET /users", s.ui(uiRead, s.uiUsers))
	mux.Handle("POST /users", s.ui(uiWrite, s.uiAddUser))
	mux.Handle("POST /users/{id}/role", s.ui(uiWrite, s.uiSetRole))
	mux.Handle("POST /users/{id}/password", s.ui(uiWrite, s.uiResetPassword))
	mux.Handle("GET /account", s.ui(uiRead, s.uiAccount))
	mux.Handle("POST /account", s.ui(uiSelf, s.uiChangePassword))
	mux.Handle("GET /users/{id}/delete", s.ui(uiWrite, s.uiConfirmDeleteUser))
	mux.Handle("POST /users/{id}/delete", s.ui(uiWrite, s.uiDeleteUser))

	// Any other path: the dashboard's 404 page, in its layout (the API answers its own
	// unknown paths with a problem+json 404 above, the gateway its own below).
	mux.Handle("/", s.ui(uiPublic, func(http.ResponseWriter, *http.Request, *uiRequest) error { return errUINotFound }))

	// Runtime profiles under /debug/pprof/ (admin API token; listed in pprof.go).
	s.handlePprof(mux)

	// Gateway (client keys; OpenAI, Anthropic and Gemini shapes). The /v1 and /v1beta
	// routes themselves (which paths exist, which style each speaks, where each goes
	// upstream) are the table in gateway/routes.go; Gateway.ServeHTTP
	// (gateway/proxy.go) starts there, and answers every unknown path under them in
	// the API's own error shape.
	if s.deps.Gateway != nil {
		mux.Handle("/v1/", s.deps.Gateway)
		// Without these, ServeMux would answer /v1 itself with an HTML redirect to /v1/;
		// the gateway answers it in the API's own error shape instead.
		mux.Handle("/v1", s.deps.Gateway)
		mux.Handle("/v1beta/", s.deps.Gateway)
		mux.Handle("/v1beta", s.deps.Gateway)
	}

	return bodyDeadline(s.deps.BodyReadTimeout, mux)
}

// apiRoutes lists every /api/v1 route: pattern, who may call it, handler. Reads take
// any API token (the configuration document: an admin token), writes an admin token.
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
		{"GET /api/v1/sessions", accessRead, s.listSessions},
		{"GET /api/v1/sessions/{session}", accessRead, s.getSession},
		{"POST /api/v1/sessions/{session}/stop", accessWrite, s.stopSession},
		{"POST /api/v1/sessions/{session}/resume", accessWrite, s.resumeSession},
		{"GET /api/v1/audit", accessRead, s.listAudit},
		{"GET /api/v1/alerts", accessRead, s.listAlerts},
		{"POST /api/v1/alerts/{webhook}/test", accessWrite, s.testAlert},

		{"GET /api/v1/requests", accessRead, s.listRequests},
		{"GET /api/v1/requests/{id}", accessRead, s.getRequest},
		{"GET /api/v1/usage", accessRead, s.getUsage},

		{"GET /api/v1/api-tokens", accessRead, s.listAPITokens},
		{"POST /api/v1/api-tokens", accessWrite, s.createAPIToken},
		{"GET /api/v1/api-tokens/{id}", accessRead, s.getAPIToken},
		{"DELETE /api/v1/api-tokens/{id}", accessWrite, s.deleteAPIToken},

		{"GET /api/v1/client-keys", accessRead, s.listClientKeys},
		{"POST /api/v1/client-keys", accessWrite, s.createClientKey},
		{"GET /api/v1/client-keys/{id}", accessRead, s.getClientKey},
		{"PATCH /api/v1/client-keys/{id}", accessWrite, s.patchClientKey},
		{"DELETE /api/v1/client-keys/{id}", accessWrite, s.deleteClientKey},

		{"GET /api/v1/config", accessAdmin, s.getConfig},
		{"POST /api/v1/config/apply", accessWrite, s.postConfigApply},
	}
}
