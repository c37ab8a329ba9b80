package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/google/go-cmp/cmp"
)

// specOperations lists "METHOD /path" for every operation in openapi.yaml.
func specOperations(t *testing.T) []string {
	t.Helper()
	doc, _ := loadSpec(t)
	var ops []string
	for p, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+p)
		}
	}
	slices.Sort(ops)
	return ops
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	var routes []string
	for _, rt := range New(Deps{}).apiRoutes() {
		if !strings.HasPrefix(rt.Pattern, "GET "+api.Prefix) && !strings.Contains(rt.Pattern, " "+api.Prefix) {
			t.Errorf("route %q is not under %s", rt.Pattern, api.Prefix)
		}
		routes = append(routes, rt.Pattern)
	}
	slices.Sort(routes)
	if diff := cmp.Diff(specOperations(t), routes); diff != "" {
		t.Errorf("routes.go and openapi.yaml disagree (-openapi.yaml +routes.go):\n%s", diff)
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	r := a.do(t, call{method: http.MethodGet, path: path("openapi.yaml"), token: noToken}).want(t, http.StatusOK)
	if string(r.body) != string(api.OpenAPISpec) {
		t.Errorf("served document differs from the embedded openapi.yaml")
	}
	j := a.do(t, call{method: http.MethodGet, path: path("openapi.yaml") + "?format=json", token: noToken}).want(t, http.StatusOK)
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(j.body, &doc); err != nil || doc.OpenAPI != "3.1.0" || doc.Paths["/api/v1/connections"] == nil {
		t.Errorf("?format=json: %v, openapi %q, %d paths", err, doc.OpenAPI, len(doc.Paths))
	}
	bad := problemOf(t, a.do(t, call{method: http.MethodGet, path: path("openapi.yaml") + "?format=xml", token: noToken, invalidRequest: true}), http.StatusBadRequest)
	if got := fields(bad); len(got) != 1 || got[0] != "format" {
		t.Errorf("?format=xml: fields %v, want [format]", got)
	}
}

// TestOpenAPIEveryOperation calls every documented operation for real and checks each
// request and response against openapi.yaml (in testAPI.do), then that none was missed.
func TestOpenAPIEveryOperation(t *testing.T) {
	t.Parallel()
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var current atomic.Pointer[string] // the connection's id, once created
	guard := session.NewGuard(nil)
	if e, _, _ := guard.Enter(context.Background(), &session.Request{KeyID: "k1", KeyName: "agents", Session: "0123456789abcdef"}); e != nil {
		e.Leave()
	}
	gates := fakeGates{
		snapshot: func() live.Snapshot {
			id := ""
			if p := current.Load(); p != nil {
				id = *p
			}
			return live.Snapshot{
				Gates: []live.Gate{
					{Key: "global", Level: live.LevelGlobal},
					withLoad(connGate(id), live.Gate{Cap: 4, InFlight: 1, Admitted: 7, WaitTotal: 12 * time.Millisecond}),
					withLoad(modelGate(id, "glm-5"), live.Gate{Cap: 4, EffectiveCap: 2, Adaptive: true, Queued: 2,
						QueuedByClient:   map[string]int{"6f1c0000-0000-4000-8000-000000000001": 2},
						QueuedByPriority: map[string]int{"interactive": 1, "batch": 1}}),
					{Key: "shadow:connection:" + id, Level: live.LevelConnection, ConnectionID: id, Cap: 2, EffectiveCap: 2,
						Shadow: true, InFlight: 1, WouldQueue: 3, PeakInFlight: 4, ShadowSince: until},
				},
				Connections: []live.Connection{{
					ID: id, Name: "every-op", Health: live.HealthCooling, Until: until, Reason: "upstream 429",
					Budgets: map[string]live.Budget{live.BudgetRPD: {Limit: 100, Remaining: 40, ResetAt: until}},
				}},
				Cluster: &live.Cluster{Mode: live.ClusterFailOpen, ReplicaID: "host-1-0a1b2c3d", Replicas: 2, Degraded: true},
				Clients: []live.Client{{ID: "6f1c0000-0000-4000-8000-000000000001", Name: "agents", Weight: 3, Cap: 2,
					Priority: "interactive", InFlight: 2, Queued: 5, QueuedByPriority: map[string]int{"interactive": 4, "batch": 1},
					Admitted: 40, Timeouts: 1}},
			}
		},
		reset: func(got string) bool { p := current.Load(); return p != nil && got == *p },
	}
	a := newTestAPI(t, apiOptions{gates: gates, sessions: guardSessions{guard}})

	a.do(t, call{method: http.MethodGet, path: path("openapi.yaml"), token: noToken}).want(t, http.StatusOK)

	body := connectionBody("every-op")
	body["priority"] = 5
	body["rateLimitOverrides"] = map[string]any{"maxConcurrent": 4, "modelConcurrency": map[string]int{"glm-5": 1}}
	created := a.createConnection(t, body)
	id := created["id"].(string)
	current.Store(&id)
	a.do(t, call{method: http.MethodGet, path: path("connections"), token: a.viewer}).want(t, http.StatusOK)
	got := a.do(t, call{method: http.MethodGet, path: path("connections", id), token: a.viewer}).want(t, http.StatusOK)
	health, _ := got.json(t)["health"].(map[string]any)
	if health["state"] != "cooling" || health["reason"] != "upstream 429" {
		t.Errorf("health = %v, want the gateway's cooling state", health)
	}
	// DESIGN.md: the connection object of /api/v1/gates appears as health.
	live := a.do(t, call{method: http.MethodGet, path: path("gates"), token: a.viewer}).want(t, http.StatusOK)
	conns, _ := live.json(t)["connections"].([]any)
	if len(conns) != 1 {
		t.Fatalf("gates connections = %v, want one", conns)
	}
	for k, v := range conns[0].(map[string]any) {
		if diff := cmp.Diff(v, health[k]); diff != "" {
			t.Errorf("health.%s differs from the gates entry (-gates +health):\n%s", k, diff)
		}
	}
	put := a.do(t, call{method: http.MethodPut, path: path("connections", id), body: got.body,
		header: map[string]string{"If-Match": got.header.Get("ETag")}}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPatch, path: path("connections", id), contentType: httpkit.MergePatchContentType,
		body:   `{"rateLimitOverrides":{"modelConcurrency":{"glm-5":null}}}`,
		header: map[string]string{"If-Match": put.header.Get("ETag")}}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("connections", id, "health", "reset")}).want(t, http.StatusNoContent)

	a.do(t, call{method: http.MethodGet, path: path("settings")}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPatch, path: path("settings"),
		body: `{"defaultMaxWaitMs":45000,"providers":{"zai":{"maxConcurrent":8}},"prices":{"zai/glm-5":{"input":2,"output":8,"cachedInput":0.2,"cacheWrite":2.5}}}`}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("gates"), token: a.viewer}).want(t, http.StatusOK)

	tok := a.do(t, call{method: http.MethodPost, path: path("api-tokens"), body: `{"name":"ci","role":"viewer"}`}).
		want(t, http.StatusCreated).json(t)
	a.do(t, call{method: http.MethodGet, path: path("api-tokens")}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("api-tokens", tok["id"].(string)), token: a.viewer}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodDelete, path: path("api-tokens", tok["id"].(string))}).want(t, http.StatusNoContent)

	key := a.do(t, call{method: http.MethodPost, path: path("client-keys"),
		body: `{"name":"agent-1","limits":{"weight":3,"maxConcurrent":2,"models":["zai/*","glm-5"]}}`}).
		want(t, http.StatusCreated).json(t)
	keyID := key["id"].(string)
	a.do(t, call{method: http.MethodGet, path: path("client-keys")}).want(t, http.StatusOK)
	gotKey := a.do(t, call{method: http.MethodGet, path: path("client-keys", keyID), token: a.viewer}).want(t, http.StatusOK)
	patched := a.do(t, call{method: http.MethodPatch, path: path("client-keys", keyID), contentType: httpkit.MergePatchContentType,
		body:   `{"enabled":false,"limits":{"models":null,"rpm":60}}`,
		header: map[string]string{"If-Match": gotKey.header.Get("ETag")}}).want(t, http.StatusOK).json(t)
	if diff := cmp.Diff(map[string]any{"weight": 3.0, "maxConcurrent": 2.0, "rpm": 60.0}, patched["limits"]); diff != "" {
		t.Errorf("patched limits mismatch (-want +got):\n%s", diff)
	}
	a.do(t, call{method: http.MethodPatch, path: path("client-keys", keyID), body: `{"enabled":true}`,
		header: map[string]string{"If-Match": gotKey.header.Get("ETag")}}).want(t, http.StatusPreconditionFailed)
	a.do(t, call{method: http.MethodPatch, path: path("client-keys", keyID), body: `{"limits":{"weight":0}}`}).
		want(t, http.StatusUnprocessableEntity)
	logged := []store.RequestRow{{StartedAt: time.Now().Add(-time.Minute), KeyID: keyID, KeyName: "agent-1",
		ConnectionID: id, ConnectionName: "every-op", Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5",
		Route: "chat", Status: 200, Attempts: 1, TTFTMs: 3, InputTokens: 1000, OutputTokens: 500, CachedTokens: 600,
		CacheWriteTokens: 300, CostMicros: 6000,
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Replica: "host-1"},
		{StartedAt: time.Now().Add(-time.Minute), Route: "chat", Status: 401, Code: "INVALID_KEY", TTFTMs: -1}}
	if err := a.store.WriteRequests(t.Context(), logged); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	reqs := a.do(t, call{method: http.MethodGet, path: path("requests") + "?limit=1", token: a.viewer}).want(t, http.StatusOK).json(t)
	next, _ := reqs["nextCursor"].(string)
	if next == "" {
		t.Fatalf("requests page of 1 has no nextCursor: %v", reqs)
	}
	a.do(t, call{method: http.MethodGet, path: path("requests") + "?status=4xx&cursor=" + next}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("requests", logged[0].ID), token: a.viewer}).want(t, http.StatusOK)
	spent := a.do(t, call{method: http.MethodGet, path: path("client-keys", keyID)}).want(t, http.StatusOK).json(t)
	if diff := cmp.Diff(map[string]any{"todayUsd": 0.006, "monthUsd": 0.006}, spent["spend"]); diff != "" {
		t.Errorf("client key spend mismatch (-want +got):\n%s", diff)
	}
	a.do(t, call{method: http.MethodGet, path: path("requests", "01890000-0000-7000-8000-000000000000")}).want(t, http.StatusNotFound)
	a.do(t, call{method: http.MethodGet, path: path("usage") + "?groupBy=model&bucket=day", token: a.viewer}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("usage") + "?since=yesterday", invalidRequest: true}).want(t, http.StatusBadRequest)

	a.do(t, call{method: http.MethodDelete, path: path("client-keys", keyID)}).want(t, http.StatusNoContent)

	page := a.do(t, call{method: http.MethodGet, path: path("audit") + "?limit=2"}).want(t, http.StatusOK).json(t)
	cursor, _ := page["nextCursor"].(string)
	if cursor == "" {
		t.Fatalf("audit page of 2 has no nextCursor: %v", page)
	}
	a.do(t, call{method: http.MethodGet, path: path("audit") + "?cursor=" + cursor}).want(t, http.StatusOK)

	exported := a.do(t, call{method: http.MethodGet, path: path("config")}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("config") + "?format=yaml"}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("config", "apply") + "?dryRun=true", body: exported.body}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), contentType: api.YAMLContentType,
		body: "clientKeys:\n  - name: from-config\n"}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: `{"settings":{"maxAttempts":0}}`}).
		want(t, http.StatusUnprocessableEntity)

	a.do(t, call{method: http.MethodDelete, path: path("connections", id)}).want(t, http.StatusNoContent)

	a.do(t, call{method: http.MethodGet, path: path("sessions"), token: a.viewer}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("sessions", "0123456789abcdef"), token: a.viewer}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("sessions", "0123456789abcdef", "stop")}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("sessions", "0123456789abcdef", "resume")}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodGet, path: path("alerts"), token: a.viewer}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPost, path: path("alerts", "ops", "test")}).want(t, http.StatusNotFound)

	// The documented error answers are checked against the spec as well.
	a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusNotFound)
	a.do(t, call{method: http.MethodGet, path: path("settings"), token: noToken}).want(t, http.StatusUnauthorized)
	a.do(t, call{method: http.MethodPatch, path: path("settings"), token: a.viewer, body: `{}`}).want(t, http.StatusForbidden)
	a.do(t, call{method: http.MethodPatch, path: path("settings"), body: `{"maxAttempts":0}`}).want(t, http.StatusUnprocessableEntity)
	a.do(t, call{method: http.MethodGet, path: path("audit") + "?limit=0", invalidRequest: true}).want(t, http.StatusBadRequest)

	a.mu.Lock()
	defer a.mu.Unlock()
	var covered []string
	for op := range a.covered {
		covered = append(covered, op)
	}
	slices.Sort(covered)
	if diff := cmp.Diff(specOperations(t), covered); diff != "" {
		t.Errorf("documented operations not exercised (-documented +called):\n%s", diff)
	}
}

// TestOpenAPIRejectsUndocumented makes sure the checks in testAPI.do have teeth: a
// response field or a request field the spec does not document fails validation.
func TestOpenAPIRejectsUndocumented(t *testing.T) {
	t.Parallel()
	_, router := loadSpec(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "/api/v1/client-keys",
		strings.NewReader(`{"name":"k","extra":1}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", httpkit.JSONContentType)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("find route: %v", err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateRequest(t.Context(), in); err == nil {
		t.Errorf("request with an undocumented field passed validation")
	}
	body := `{"id":"6f1c0000-0000-4000-8000-000000000000","name":"k","preview":"gh_ck_…abcd",` +
		`"createdAt":"2026-01-01T00:00:00Z","lastUsedAt":null,"secret":"s","extra":true}`
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: http.StatusCreated,
		Header:  http.Header{"Content-Type": {httpkit.JSONContentType}, "Location": {"/api/v1/client-keys/x"}},
		Body:    io.NopCloser(strings.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(t.Context(), out); err == nil {
		t.Errorf("response with an undocumented field passed validation")
	}
}
