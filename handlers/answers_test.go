package handlers

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

var updateAnswers = flag.Bool("update", false, "rewrite testdata/answers from the current answers")

// answerCase is one request of TestSameAnswers: as whom, what, and the golden file.
type answerCase struct {
	name   string
	as     string // "admin", "viewer" (dashboard sessions), "token" (admin API token), "" (anonymous)
	method string
	path   string
	body   string // JSON for the API, urlencoded form for the dashboard
}

// TestSameAnswers asks the whole server (real routes, real Postgres, seeded data) a
// sample of dashboard pages and API answers and compares them byte for byte with
// testdata/answers, after replacing only what differs from run to run (ids, times,
// secrets' random parts, durations measured). It guards moves of the handlers: the
// same routes must answer the same bytes. Run with -update to rewrite the files.
func TestSameAnswers(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	logger := slog.New(slog.DiscardHandler)
	st, err := store.New(pool, bytes.Repeat([]byte{0x42}, 32), logger)
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	// The clock stands at half past the current hour: the seeded rows (minutes
	// before it) fall in the same hour and day buckets on every run, and sessions,
	// whose expiry the database checks against its own clock, stay valid.
	t0 := time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)
	gates := &dashGates{}
	srv := httptest.NewServer(New(Deps{
		Store: st, Logger: logger, Gates: gates,
		Now: func() time.Time { return t0 },
	}).Handler())
	t.Cleanup(srv.Close)

	ctx := t.Context()
	ids := map[string]string{} // id → stable label
	if _, err := st.CreateUser(ctx, store.ActorSystem, "admin@example.com", dashPassword, store.RoleAdmin); err != nil {
		t.Fatalf("create admin: %v", err)
	}
	viewer, err := st.CreateUser(ctx, store.ActorSystem, "viewer@example.com", dashPassword, store.RoleViewer)
	if err != nil {
		t.Fatalf("create viewer: %v", err)
	}
	ids[viewer.ID] = "user-viewer"
	tok, secret, err := st.CreateAPIToken(ctx, store.ActorSystem, "ops-admin", store.RoleAdmin)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	ids[tok.ID] = "token-ops-admin"

	var conns []store.Connection
	for i, name := range []string{"zai-main", "anthropic-team"} {
		body := map[string]any{
			"name": name, "provider": []string{"zai", "anthropic"}[i], "apiStyle": []string{"openai", "anthropic"}[i],
			"baseUrl": []string{"https://api.z.ai/api/paas/v4", "https://api.anthropic.com"}[i],
			"apiKey":  "sk-test-0123456789abcdef-" + name,
			"models":  [][]string{{"glm-5", "glm-4.7"}, {"claude-sonnet-4-5"}}[i],
		}
		raw, _ := json.Marshal(body)
		res := answerDo(t, srv, http.DefaultClient, http.MethodPost, "/api/v1/connections", "application/json", string(raw), secret)
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("create connection %s: %d", name, res.StatusCode)
		}
		var got struct{ ID string }
		if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
			t.Fatalf("create connection %s: %v", name, err)
		}
		_ = res.Body.Close()
		c, err := st.GetConnection(ctx, got.ID)
		if err != nil {
			t.Fatalf("get connection: %v", err)
		}
		conns = append(conns, c)
		ids[c.ID] = "conn-" + name
	}
	var keys []store.ClientKey
	for _, k := range []struct{ name, limits string }{
		{"team-a", `{"weight":1,"maxConcurrent":8,"rpm":120,"models":["zai/*"]}`},
		{"team-b", `{"weight":3,"tpd":5000000,"budgetUsdDaily":5}`},
	} {
		in := store.NewClientKeyInput(k.name)
		in.Limits = json.RawMessage(k.limits)
		key, _, err := st.CreateClientKey(ctx, store.ActorSystem, in)
		if err != nil {
			t.Fatalf("create key %s: %v", k.name, err)
		}
		keys = append(keys, key)
		ids[key.ID] = "key-" + k.name
	}
	rows := []store.RequestRow{
		{StartedAt: t0.Add(-3 * time.Minute), KeyID: keys[0].ID, KeyName: "team-a", ConnectionID: conns[0].ID, ConnectionName: "zai-main",
			Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, TTFTMs: 12,
			UpstreamMs: 30, TotalMs: 40, InputTokens: 1000, OutputTokens: 500, CachedTokens: 200, CostMicros: 6000,
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Session: "0123456789abcdef", Affinity: "bound"},
		{StartedAt: t0.Add(-2 * time.Minute), KeyID: keys[0].ID, KeyName: "team-a", Model: "glm-5", Route: "chat", Status: 429,
			Code: "SEMAPHORE_TIMEOUT", Gate: "key:" + keys[0].ID, QueueMs: 200, TTFTMs: -1, TotalMs: 201},
		{StartedAt: t0.Add(-time.Minute), KeyID: keys[1].ID, KeyName: "team-b", ConnectionID: conns[1].ID, ConnectionName: "anthropic-team",
			Provider: "anthropic", Model: "claude-sonnet-4-5", UpstreamModel: "claude-sonnet-4-5", Route: "messages", Stream: true,
			Status: 200, Attempts: 2, TTFTMs: 9, UpstreamMs: 80, TotalMs: 95, InputTokens: 10, OutputTokens: 5, CostMicros: 60},
		{StartedAt: t0.Add(-30 * time.Second), KeyID: keys[1].ID, KeyName: "team-b", Model: "gpt-9", Route: "chat", Status: 404,
			Code: "MODEL_NOT_FOUND", TTFTMs: -1, TotalMs: 1},
	}
	if err := st.WriteRequests(ctx, rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	// The writer sets each row's id; read them back to label them.
	got, _, err := st.ListRequests(ctx, store.RequestFilter{Limit: 10})
	if err != nil {
		t.Fatalf("ListRequests: %v", err)
	}
	var written []store.RequestRow
	for _, r := range rows {
		for _, g := range got {
			if g.StartedAt.Equal(r.StartedAt) {
				written = append(written, g)
			}
		}
	}
	for i, r := range written {
		ids[r.ID] = fmt.Sprintf("request-%d", i)
	}
	if len(written) != len(rows) {
		t.Fatalf("read back %d rows, want %d", len(written), len(rows))
	}
	gates.set(live.Snapshot{
		Gates: []live.Gate{
			withLoad(connGate(conns[0].ID), live.Gate{Cap: 4, EffectiveCap: 4, InFlight: 2, Queued: 1}),
			withLoad(modelGate(conns[0].ID, "glm-5"), live.Gate{Cap: 3, EffectiveCap: 3, InFlight: 2}),
		},
		Clients: []live.Client{{ID: keys[0].ID, Name: "team-a", Weight: 1, Cap: 8, InFlight: 2, Queued: 1}},
	})

	clients := map[string]*http.Client{"": answerClient(t), "admin": answerClient(t), "viewer": answerClient(t)}
	for _, who := range []string{"admin", "viewer"} {
		form := url.Values{"email": {who + "@example.com"}, "password": {dashPassword}}
		res := answerDo(t, srv, clients[who], http.MethodPost, "/login", "application/x-www-form-urlencoded", form.Encode(), "")
		_ = res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in as %s: %d", who, res.StatusCode)
		}
	}
	conn, key, req := conns[0].ID, keys[0].ID, written[0].ID
	cases := []answerCase{
		{name: "login", path: "/login"},
		{name: "login-failed", method: http.MethodPost, path: "/login", body: "email=admin%40example.com&password=wrong"},
		{name: "overview-signed-out", path: "/"},
		{name: "overview", as: "admin", path: "/"},
		{name: "overview-viewer", as: "viewer", path: "/"},
		{name: "live", as: "admin", path: "/live"},
		{name: "connections", as: "admin", path: "/connections"},
		{name: "connection-new", as: "admin", path: "/connections/new"},
		{name: "connection", as: "admin", path: "/connections/" + conn},
		{name: "connection-viewer", as: "viewer", path: "/connections/" + conn},
		{name: "connection-delete", as: "admin", path: "/connections/" + conn + "/delete"},
		{name: "connection-missing", as: "admin", path: "/connections/01890000-0000-7000-8000-000000000000"},
		{name: "connection-save-invalid", as: "admin", method: http.MethodPost, path: "/connections/new", body: "name=&provider=zai"},
		{name: "settings", as: "admin", path: "/settings"},
		{name: "keys", as: "admin", path: "/keys"},
		{name: "key", as: "admin", path: "/keys/" + key},
		{name: "key-revoke", as: "admin", path: "/keys/" + key + "/revoke"},
		{name: "tokens", as: "admin", path: "/tokens"},
		{name: "audit", as: "admin", path: "/audit"},
		{name: "requests", as: "viewer", path: "/requests"},
		{name: "requests-filtered", as: "viewer", path: "/requests?status=429"},
		{name: "requests-bad-filter", as: "viewer", path: "/requests?status=teapot"},
		{name: "requests-csv", as: "viewer", path: "/requests.csv"},
		{name: "request", as: "viewer", path: "/requests/" + req},
		{name: "request-refused", as: "viewer", path: "/requests/" + written[1].ID},
		{name: "sessions", as: "viewer", path: "/sessions"},
		{name: "alerts", as: "admin", path: "/alerts"},
		{name: "usage", as: "viewer", path: "/usage"},
		{name: "usage-csv", as: "viewer", path: "/usage.csv?range=24h&chart=spend"},
		{name: "users", as: "admin", path: "/users"},
		{name: "account", as: "viewer", path: "/account"},
		{name: "admin-only-as-viewer", as: "viewer", path: "/connections/new"},
		{name: "logout", as: "viewer", path: "/logout"},

		{name: "api-openapi", path: "/api/v1/openapi.yaml"},
		{name: "api-unauthenticated", path: "/api/v1/connections"},
		{name: "api-connections", as: "token", path: "/api/v1/connections"},
		{name: "api-connection", as: "token", path: "/api/v1/connections/" + conn},
		{name: "api-connection-missing", as: "token", path: "/api/v1/connections/01890000-0000-7000-8000-000000000000"},
		{name: "api-connection-invalid", as: "token", method: http.MethodPost, path: "/api/v1/connections",
			body: `{"name":"","provider":"nope","apiStyle":"openai","baseUrl":"ftp://x","apiKey":"k","models":[]}`},
		{name: "api-connection-bad-json", as: "token", method: http.MethodPost, path: "/api/v1/connections", body: `{"name":`},
		{name: "api-settings", as: "token", path: "/api/v1/settings"},
		{name: "api-settings-invalid", as: "token", method: http.MethodPatch, path: "/api/v1/settings", body: `{"defaultMaxConcurrent":-1}`},
		{name: "api-gates", as: "token", path: "/api/v1/gates"},
		{name: "api-audit", as: "token", path: "/api/v1/audit"},
		{name: "api-requests", as: "token", path: "/api/v1/requests"},
		{name: "api-request", as: "token", path: "/api/v1/requests/" + req},
		{name: "api-usage", as: "token", path: "/api/v1/usage"},
		{name: "api-tokens", as: "token", path: "/api/v1/api-tokens"},
		{name: "api-client-keys", as: "token", path: "/api/v1/client-keys"},
		{name: "api-client-key", as: "token", path: "/api/v1/client-keys/" + key},
		{name: "api-config", as: "token", path: "/api/v1/config"},
		{name: "api-sessions", as: "token", path: "/api/v1/sessions"},
		{name: "api-alerts", as: "token", path: "/api/v1/alerts"},
		{name: "api-unknown", as: "token", path: "/api/v1/nope"},
		{name: "api-method", as: "token", method: http.MethodPut, path: "/api/v1/gates"},
		{name: "healthz", path: "/healthz"},
	}
	dir := filepath.Join("testdata", "answers")
	if *updateAnswers {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	norm := answerNormaliser(ids, secret)
	for _, c := range cases {
		method := c.method
		if method == "" {
			method = http.MethodGet
		}
		ct, bearer, client := "", "", clients[c.as]
		if c.as == "token" {
			bearer, client = secret, clients[""]
		}
		if c.body != "" {
			ct = "application/x-www-form-urlencoded"
			if strings.HasPrefix(c.path, "/api/") {
				ct = "application/json"
			}
		}
		res := answerDo(t, srv, client, method, c.path, ct, c.body, bearer)
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Fatalf("%s: read body: %v", c.name, err)
		}
		got := norm(answerText(res, body))
		file := filepath.Join(dir, c.name+".txt")
		if *updateAnswers {
			if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v (run with -update to write it)", c.name, err)
			continue
		}
		if diff := cmp.Diff(string(want), got); diff != "" {
			t.Errorf("%s %s: answer differs from %s (-want +got):\n%s", method, c.path, file, diff)
		}
	}
}

// answerClient is a client with its own cookie jar that does not follow redirects.
func answerClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func answerDo(t *testing.T, srv *httptest.Server, c *http.Client, method, path, contentType, body, bearer string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Accept-Language", "en")
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return res
}

// answerHeaders are the response headers the golden files keep; the rest (Date,
// Set-Cookie's random value, Content-Length of a normalised body) vary or follow.
var answerHeaders = []string{
	"Allow", "Cache-Control", "Content-Security-Policy", "Content-Type", "ETag", "Location",
	"Referrer-Policy", "Www-Authenticate", "X-Content-Type-Options",
}

// answerText is the status, the kept headers and the body of res.
func answerText(res *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", res.StatusCode)
	keys := make([]string, 0, len(answerHeaders))
	for _, k := range answerHeaders {
		if v := res.Header.Values(k); len(v) > 0 {
			keys = append(keys, k+": "+strings.Join(v, ", "))
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "\n")
	}
	for _, c := range res.Cookies() {
		fmt.Fprintf(&b, "Set-Cookie: %s\n", c.Name)
	}
	b.WriteString("\n")
	b.Write(body)
	return b.String()
}

var (
	answerUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// Clock times (chart hours, day labels) and ages ("5 min ago") follow the run's
	// hour and the database's clock.
	answerClock = regexp.MustCompile(`\b\d{2}:\d{2}\b`)
	answerAge   = regexp.MustCompile(`just now|\d+ (min|h) ago`)
	// A secret's preview ends with its last, random characters.
	answerPreview = regexp.MustCompile(`(gh_[a-z]{2}_…)[A-Za-z0-9_-]{4}`)
	// Times as the API (RFC 3339) and the pages (date, clock) write them.
	answerTimes = []*regexp.Regexp{
		regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}%3A\d{2}%3A\d{2}(\.\d+)?Z`), // in a query string
		regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}| UTC)?`),
		regexp.MustCompile(`\d{4}-\d{2}-\d{2}`),
	}
)

// answerNormaliser replaces what changes from run to run: ids by their labels, the
// token secret, secrets' previews, times and ages.
func answerNormaliser(ids map[string]string, secret string) func(string) string {
	return func(s string) string {
		s = strings.ReplaceAll(s, secret, "<token-secret>")
		s = answerUUID.ReplaceAllStringFunc(s, func(id string) string {
			if label, ok := ids[id]; ok {
				return "<" + label + ">"
			}
			return "<uuid>"
		})
		s = answerPreview.ReplaceAllString(s, "${1}<rand>")
		for _, re := range answerTimes {
			s = re.ReplaceAllString(s, "<time>")
		}
		s = answerClock.ReplaceAllString(s, "<clock>")
		s = answerAge.ReplaceAllString(s, "<age>")
		return s
	}
}
