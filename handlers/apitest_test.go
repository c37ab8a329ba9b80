package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/handlers/api"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// testSecretKey is the installation secret of every test store.
var testSecretKey = bytes.Repeat([]byte{0x5a}, 32)

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fakeGates is a GateSource whose answers the test sets.
type fakeGates struct {
	snapshot func() live.Snapshot
	reset    func(id string) bool
}

func (f fakeGates) Snapshot() live.Snapshot                       { return f.snapshot() }
func (f fakeGates) ResetHealth(_ context.Context, id string) bool { return f.reset(id) }

// testAPI is a Server over a fresh database, served by httptest, with an admin and a
// viewer token, a captured log and a client that checks every exchange against
// openapi.yaml.
type testAPI struct {
	srv    *httptest.Server
	store  *store.Store
	pool   interface{ Close() }
	logs   *syncBuffer
	admin  string
	viewer string

	doc    *openapi3.T
	router routers.Router

	mu        sync.Mutex
	bodies    []string // every response body, for the secret checks
	covered   map[string]bool
	unchecked []string // exchanges no documented operation matched
}

type apiOptions struct {
	gates    GateSource
	sessions SessionSource
	deny     UpstreamDeny
	alerts   AlertSource
}

func newTestAPI(t *testing.T, opts apiOptions) *testAPI {
	t.Helper()
	pool := storetest.Pool(t)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := store.New(pool, testSecretKey, logger)
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	srv := httptest.NewServer(New(Deps{Store: st, Logger: logger, Gates: opts.gates, Sessions: opts.sessions, UpstreamDeny: opts.deny, Alerts: opts.alerts}).Handler())
	t.Cleanup(srv.Close)
	_, admin, err := st.CreateAPIToken(t.Context(), store.ActorSystem, "test-admin", store.RoleAdmin)
	if err != nil {
		t.Fatalf("create admin token: %v", err)
	}
	_, viewer, err := st.CreateAPIToken(t.Context(), store.ActorSystem, "test-viewer", store.RoleViewer)
	if err != nil {
		t.Fatalf("create viewer token: %v", err)
	}
	doc, router := loadSpec(t)
	return &testAPI{
		srv: srv, store: st, pool: pool, logs: logs, admin: admin, viewer: viewer,
		doc: doc, router: router, covered: map[string]bool{},
	}
}

// loadSpec parses and validates openapi.yaml and builds a router over it.
func loadSpec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPISpec)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	// The router matches servers by host, and the one server is "/" (wherever the
	// instance listens): route the test server's requests by path alone.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	return doc, router
}

// call is one request of a test.
type call struct {
	method string
	path   string
	// body is sent as it is when it is a string or []byte, else as JSON.
	body        any
	contentType string // default application/json when there is a body
	token       string // default the admin token; noToken sends none
	header      map[string]string
	// invalidRequest marks a request that breaks the spec on purpose; only the
	// response is checked then.
	invalidRequest bool
}

// noToken makes call send no Authorization header.
const noToken = "-"

// response is what came back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic value.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// do sends c, checks the request (unless invalidRequest) and the response against
// openapi.yaml, and returns the response.
func (a *testAPI) do(t *testing.T, c call) response {
	t.Helper()
	var body []byte
	switch b := c.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			t.Fatalf("marshal request body: %v", err)
		}
	}
	newReq := func(ctx context.Context) *http.Request {
		req, err := http.NewRequestWithContext(ctx, c.method, a.srv.URL+c.path, bytes.NewReader(body))
		if err != nil {
			t.Fatalf("new request: %v", err)
		}
		if body != nil {
			ct := c.contentType
			if ct == "" {
				ct = httpkit.JSONContentType
			}
			req.Header.Set("Content-Type", ct)
		}
		switch c.token {
		case "":
			req.Header.Set("Authorization", "Bearer "+a.admin)
		case noToken:
		default:
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for k, v := range c.header {
			req.Header.Set(k, v)
		}
		return req
	}

	// Validate the request on a copy: validation consumes the body.
	check := newReq(t.Context())
	route, params, routeErr := a.router.FindRoute(check)
	var input *openapi3filter.RequestValidationInput
	if routeErr == nil {
		input = &openapi3filter.RequestValidationInput{
			Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
		}
		if !c.invalidRequest {
			if err := openapi3filter.ValidateRequest(t.Context(), input); err != nil {
				t.Errorf("%s %s: request does not match openapi.yaml: %v", c.method, c.path, err)
			}
		}
	}

	res, err := a.srv.Client().Do(newReq(t.Context()))
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", c.method, c.path, err)
	}
	a.mu.Lock()
	a.bodies = append(a.bodies, string(got))
	if routeErr == nil {
		a.covered[route.Method+" "+route.Path] = true
	} else {
		a.unchecked = append(a.unchecked, c.method+" "+c.path)
	}
	a.mu.Unlock()

	if routeErr == nil {
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: input,
			Status:                 res.StatusCode,
			Header:                 res.Header,
			Body:                   io.NopCloser(bytes.NewReader(got)),
			Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		if err := openapi3filter.ValidateResponse(t.Context(), out); err != nil {
			t.Errorf("%s %s: response %d does not match openapi.yaml: %v\n%s", c.method, c.path, res.StatusCode, err, got)
		}
	}
	return response{status: res.StatusCode, header: res.Header, body: got}
}

// want fails the test unless r has status.
func (r response) want(t *testing.T, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body: %s", r.status, status, r.body)
	}
	return r
}

// connectionBody is a valid creation body with a unique name.
func connectionBody(name string) map[string]any {
	return map[string]any{
		"name":     name,
		"provider": "zai",
		"apiStyle": "openai",
		"baseUrl":  "https://api.z.ai/api/paas/v4",
		"apiKey":   "sk-test-0123456789abcdef-" + name, // long enough for a preview
		"models":   []string{"glm-5", "glm-4.7"},
	}
}

// createConnection creates a connection and returns its response body.
func (a *testAPI) createConnection(t *testing.T, body map[string]any) map[string]any {
	t.Helper()
	return a.do(t, call{method: http.MethodPost, path: "/api/v1/connections", body: body}).
		want(t, http.StatusCreated).json(t)
}

// problemOf decodes a problem+json response, failing unless it is one with status.
func problemOf(t *testing.T, r response, status int) httpkit.Problem {
	t.Helper()
	r.want(t, status)
	if ct := r.header.Get("Content-Type"); ct != httpkit.ProblemContentType {
		t.Fatalf("Content-Type = %q, want %q", ct, httpkit.ProblemContentType)
	}
	var p httpkit.Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body: %v\n%s", err, r.body)
	}
	if p.Status != status || p.Type != "about:blank" || p.Title != http.StatusText(status) || p.Detail == "" {
		t.Fatalf("problem = %+v, want status %d with title and detail", p, status)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil || !bytes.HasPrefix(bytes.TrimSpace(raw["errors"]), []byte("[")) {
		t.Fatalf("problem body has no errors array: %s", r.body)
	}
	return p
}

// fields returns the paths of a problem's field errors, in order.
func fields(p httpkit.Problem) []string {
	out := make([]string, 0, len(p.Errors))
	for _, e := range p.Errors {
		out = append(out, e.Field)
		if e.Message == "" {
			out = append(out, "<empty message for "+e.Field+">")
		}
	}
	return out
}

// path joins API path segments.
func path(segs ...string) string { return "/api/v1/" + strings.Join(segs, "/") }
