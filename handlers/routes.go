package handlers

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/handlers/ui"
	"github.com/gatehouse-dev/gatehouse/static"
)

// Who may call a route: the API's by token role, the dashboard's by session.
const (
	accessPublic = httpkit.AccessPublic
	accessRead   = httpkit.AccessRead
	accessWrite  = httpkit.AccessWrite
	accessAdmin  = httpkit.AccessAdmin

	uiPublic = ui.Public
	uiRead   = ui.Read
	uiWrite  = ui.Write
	uiSelf   = ui.Self
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
		mux.Handle("GET /metrics", s.core.RequireToken(s.deps.Metrics))
	}

	// REST API (API tokens; JSON and problem+json). The list is below, so tests can
	// walk it and compare it with openapi.yaml.
	routes := s.apiRoutes()
	for _, rt := range routes {
		mux.Handle(rt.Pattern, s.api.Serve(rt))
	}
	mux.Handle(api.Prefix, s.api.Fallback(routes))

	// Dashboard (session cookies; HTML). d.Serve checks the session and the role and
	// refuses cross-origin writes (http.CrossOriginProtection) with 403.
	d := s.dash
	mux.Handle("GET "+static.Prefix, static.Compressed(d.Assets()))
	mux.Handle("GET /login", d.Serve(uiPublic, d.LoginForm))
	mux.Handle("POST /login", d.Serve(uiPublic, d.Login))
	mux.Handle("GET /logout", d.Serve(uiPublic, d.LogoutPage))
	mux.Handle("POST /logout", d.Serve(uiPublic, d.Logout))
	mux.Handle("GET /{$}", d.Serve(uiRead, d.Overview))
	mux.Handle("GET /live", d.Serve(uiRead, d.Live))
	mux.Handle("GET /connections", d.Serve(uiRead, d.Connections))
	mux.Handle("GET /connections/new", d.Serve(uiWrite, d.NewConnection))
	mux.Handle("POST /connections/new", d.Serve(uiWrite, d.CreateConnection))
	mux.Handle("GET /connections/{id}", d.Serve(uiRead, d.EditConnection))
	mux.Handle("POST /connections/{id}", d.Serve(uiWrite, d.SaveConnection))
	mux.Handle("POST /connections/{id}/toggle", d.Serve(uiWrite, d.ToggleConnection))
	mux.Handle("POST /connections/{id}/test", d.Serve(uiWrite, d.TestConnection))
	mux.Handle("GET /connections/{id}/delete", d.Serve(uiWrite, d.ConfirmDeleteConnection))
	mux.Handle("POST /connections/{id}/delete", d.Serve(uiWrite, d.DeleteConnection))
	mux.Handle("GET /settings", d.Serve(uiRead, d.Settings))
	mux.Handle("POST /settings", d.Serve(uiWrite, d.SaveSettings))
	mux.Handle("GET /keys", d.Serve(uiRead, d.Keys(ui.KindKeys)))
	mux.Handle("POST /keys", d.Serve(uiWrite, d.CreateKey(ui.KindKeys)))
	mux.Handle("GET /keys/{id}", d.Serve(uiRead, d.EditKey))
	mux.Handle("POST /keys/{id}", d.Serve(uiWrite, d.SaveKey))
	mux.Handle("GET /keys/{id}/revoke", d.Serve(uiWrite, d.ConfirmRevoke(ui.KindKeys)))
	mux.Handle("POST /keys/{id}/revoke", d.Serve(uiWrite, d.Revoke(ui.KindKeys)))
	mux.Handle("GET /tokens", d.Serve(uiRead, d.Keys(ui.KindTokens)))
	mux.Handle("POST /tokens", d.Serve(uiWrite, d.CreateKey(ui.KindTokens)))
	mux.Handle("GET /tokens/{id}/revoke", d.Serve(uiWrite, d.ConfirmRevoke(ui.KindTokens)))
	mux.Handle("POST /tokens/{id}/revoke", d.Serve(uiWrite, d.Revoke(ui.KindTokens)))
	mux.Handle("GET /audit", d.Serve(uiRead, d.Audit))
	mux.Handle("GET /requests", d.Serve(uiRead, d.Requests))
	mux.Handle("GET /requests.csv", d.Serve(uiRead, d.RequestsCSV))
	mux.Handle("GET /requests/live", d.Serve(uiRead, d.RequestsLive))
	mux.Handle("GET /requests/{id}", d.Serve(uiRead, d.Request))
	mux.Handle("GET /sessions", d.Serve(uiRead, d.Sessions))
	mux.Handle("GET /sessions/live", d.Serve(uiRead, d.SessionsLive))
	mux.Handle("POST /sessions/{session}/stop", d.Serve(uiWrite, d.StopSession))
	mux.Handle("POST /sessions/{session}/resume", d.Serve(uiWrite, d.ResumeSession))
	mux.Handle("GET /alerts", d.Serve(uiRead, d.Alerts))
	mux.Handle("GET /alerts/live", d.Serve(uiRead, d.AlertsLive))
	mux.Handle("POST /alerts/{webhook}/test", d.Serve(uiWrite, d.TestAlert))
	mux.Handle("GET /usage", d.Serve(uiRead, d.Usage))
	mux.Handle("GET /usage.csv", d.Serve(uiRead, d.UsageCSV))
	mux.Handle("GET /usage/live", d.Serve(uiRead, d.UsageLive))
	mux.Handle("GET /users", d.Serve(uiRead, d.Users))
	mux.Handle("POST /users", d.Serve(uiWrite, d.AddUser))
	mux.Handle("POST /users/{id}/role", d.Serve(uiWrite, d.SetRole))
	mux.Handle("POST /users/{id}/password", d.Serve(uiWrite, d.ResetPassword))
	mux.Handle("GET /account", d.Serve(uiRead, d.Account))
	mux.Handle("POST /account", d.Serve(uiSelf, d.ChangePassword))
	mux.Handle("GET /users/{id}/delete", d.Serve(uiWrite, d.ConfirmDeleteUser))
	mux.Handle("POST /users/{id}/delete", d.Serve(uiWrite, d.DeleteUser))

	// Any other path: the dashboard's 404 page, in its layout (the API answers its own
	// unknown paths with a problem+json 404 above, the gateway its own below).
	mux.Handle("/", d.Serve(uiPublic, d.NotFound))

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

	return httpkit.BodyDeadline(s.deps.BodyReadTimeout, mux)
}

// apiRoutes lists every /api/v1 route: pattern, who may call it, handler. Reads take
// any API token (the configuration document: an admin token), writes an admin token.
func (s *Server) apiRoutes() []api.Route {
	a := s.api
	return []api.Route{
		route("GET /api/v1/openapi.yaml", accessPublic, a.GetOpenAPI),

		route("GET /api/v1/connections", accessRead, a.ListConnections),
		route("POST /api/v1/connections", accessWrite, a.CreateConnection),
		route("GET /api/v1/connections/{id}", accessRead, a.GetConnection),
		route("PUT /api/v1/connections/{id}", accessWrite, a.ReplaceConnection),
		route("PATCH /api/v1/connections/{id}", accessWrite, a.PatchConnection),
		route("DELETE /api/v1/connections/{id}", accessWrite, a.DeleteConnection),
		route("POST /api/v1/connections/{id}/health/reset", accessWrite, a.ResetConnectionHealth),

		route("GET /api/v1/settings", accessRead, a.GetSettings),
		route("PATCH /api/v1/settings", accessWrite, a.PatchSettings),

		route("GET /api/v1/gates", accessRead, a.GetGates),
		route("GET /api/v1/sessions", accessRead, a.ListSessions),
		route("GET /api/v1/sessions/{session}", accessRead, a.GetSession),
		route("POST /api/v1/sessions/{session}/stop", accessWrite, a.StopSession),
		route("POST /api/v1/sessions/{session}/resume", accessWrite, a.ResumeSession),
		route("GET /api/v1/audit", accessRead, a.ListAudit),
		route("GET /api/v1/alerts", accessRead, a.ListAlerts),
		route("POST /api/v1/alerts/{webhook}/test", accessWrite, a.TestAlert),

		route("GET /api/v1/requests", accessRead, a.ListRequests),
		route("GET /api/v1/requests/{id}", accessRead, a.GetRequest),
		route("GET /api/v1/usage", accessRead, a.GetUsage),

		route("GET /api/v1/api-tokens", accessRead, a.ListAPITokens),
		route("POST /api/v1/api-tokens", accessWrite, a.CreateAPIToken),
		route("GET /api/v1/api-tokens/{id}", accessRead, a.GetAPIToken),
		route("DELETE /api/v1/api-tokens/{id}", accessWrite, a.DeleteAPIToken),

		route("GET /api/v1/client-keys", accessRead, a.ListClientKeys),
		route("POST /api/v1/client-keys", accessWrite, a.CreateClientKey),
		route("GET /api/v1/client-keys/{id}", accessRead, a.GetClientKey),
		route("PATCH /api/v1/client-keys/{id}", accessWrite, a.PatchClientKey),
		route("DELETE /api/v1/client-keys/{id}", accessWrite, a.DeleteClientKey),

		route("GET /api/v1/config", accessAdmin, a.GetConfig),
		route("POST /api/v1/config/apply", accessWrite, a.PostConfigApply),
	}
}

// route is one line of apiRoutes' table.
func route(pattern string, access httpkit.Access, h api.Handler) api.Route {
	return api.Route{Pattern: pattern, Access: access, Handler: h}
}
