package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// dashPassword is every test user's password.
const dashPassword = "correct horse battery"

// dashGates is a GateSource whose snapshot the test sets.
type dashGates struct {
	mu   sync.Mutex
	view live.Snapshot
}

func (g *dashGates) Snapshot() live.Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.view
}

func (g *dashGates) ResetHealth(context.Context, string) bool { return true }

func (g *dashGates) set(v live.Snapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.view = v
}

// connGate and modelGate are connection id's gates as the gateway reports them, and
// withLoad gives one its numbers. The handlers read the fields; the tests spell the
// keys only to find the gates in the page and in the JSON.
func connGate(id string) live.Gate {
	return live.Gate{Key: fixtureKey(live.LevelConnection, id), Level: live.LevelConnection, ConnectionID: id}
}

func modelGate(id, model string) live.Gate {
	return live.Gate{Key: fixtureKey(live.LevelModel, id, model), Level: live.LevelModel, ConnectionID: id, Model: model}
}

// fixtureKey spells a gate key as the gateway does (level:id[:model]).
func fixtureKey(parts ...string) string { return strings.Join(parts, ":") }

func withLoad(g, load live.Gate) live.Gate {
	load.Key, load.Level, load.ConnectionID, load.Provider, load.Model = g.Key, g.Level, g.ConnectionID, g.Provider, g.Model
	return load
}

// dash is a full Server over a fresh database, served by httptest, with an admin
// and a viewer user.
type dash struct {
	srv    *httptest.Server
	store  *store.Store
	gates  *dashGates
	admin  store.User
	viewer store.User
}

func newDash(t *testing.T) *dash { return newDashWith(t, nil) }

// newDashWith is newDash with the Server's Deps adjusted by configure (when non-nil)
// and the Server itself by setup.
func newDashWith(t *testing.T, configure func(*Deps), setup ...func(*Server)) *dash {
	t.Helper()
	pool := storetest.Pool(t)
	logger := slog.New(slog.DiscardHandler)
	st, err := store.New(pool, bytes.Repeat([]byte{0x42}, 32), logger)
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	gates := &dashGates{}
	deps := Deps{Store: st, Logger: logger, Gates: gates}
	if configure != nil {
		configure(&deps)
	}
	server := New(deps)
	for _, f := range setup {
		f(server)
	}
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	d := &dash{srv: srv, store: st, gates: gates}
	if d.admin, err = st.CreateUser(t.Context(), store.ActorSystem, "admin@example.com", dashPassword, store.RoleAdmin); err != nil {
		t.Fatalf("create admin: %v", err)
	}
	if d.viewer, err = st.CreateUser(t.Context(), store.ActorSystem, "viewer@example.com", dashPassword, store.RoleViewer); err != nil {
		t.Fatalf("create viewer: %v", err)
	}
	return d
}

// client returns a client with its own cookie jar that does not follow redirects.
func (d *dash) client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatalf("cookie jar: %v", err)
	}
	return &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// signIn returns a client signed in as email.
func (d *dash) signIn(t *testing.T, email string) *http.Client {
	t.Helper()
	c := d.client(t)
	res := d.post(t, c, "/login", url.Values{"email": {email}, "password": {dashPassword}})
	if res.status != http.StatusSeeOther {
		t.Fatalf("sign in as %s: status %d, want 303\n%s", email, res.status, res.body)
	}
	return c
}

// page is a dashboard response, parsed.
type page struct {
	status int
	header http.Header
	body   string
	doc    *goquery.Document
}

func (d *dash) do(t *testing.T, c *http.Client, req *http.Request) page {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse html: %v", err)
	}
	return page{status: res.StatusCode, header: res.Header, body: string(body), doc: doc}
}

func (d *dash) get(t *testing.T, c *http.Client, path string) page {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, d.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d.do(t, c, req)
}

func (d *dash) post(t *testing.T, c *http.Client, path string, form url.Values, headers ...string) page {
	t.Helper()
	return d.send(t, c, http.MethodPost, path, "application/x-www-form-urlencoded", form.Encode(), headers...)
}

// send makes any request with a body; headers are name, value pairs.
func (d *dash) send(t *testing.T, c *http.Client, method, path, contentType, body string, headers ...string) page {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, d.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return d.do(t, c, req)
}

// want fails the test unless the page has status.
func (p page) want(t *testing.T, status int) page {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d\n%s", p.status, status, p.body)
	}
	return p
}

// testid selects by data-testid.
func (p page) testid(id string) *goquery.Selection {
	return p.doc.Find(`[data-testid="` + id + `"]`)
}

// texts returns the trimmed text of every element matched.
func texts(sel *goquery.Selection) []string {
	var out []string
	sel.Each(func(_ int, s *goquery.Selection) { out = append(out, strings.TrimSpace(s.Text())) })
	return out
}

// formValues collects what a browser would submit from the form: enabled inputs,
// checked radios and checkboxes, textareas and selects.
func formValues(form *goquery.Selection) url.Values {
	v := url.Values{}
	form.Find("input, textarea, select").Each(func(_ int, s *goquery.Selection) {
		name, ok := s.Attr("name")
		if !ok || name == "" {
			return
		}
		if _, disabled := s.Attr("disabled"); disabled {
			return
		}
		switch {
		case goquery.NodeName(s) == "textarea":
			v.Add(name, strings.TrimPrefix(s.Text(), "\n"))
		case goquery.NodeName(s) == "select":
			sel := s.Find("option[selected]")
			if sel.Length() == 0 {
				sel = s.Find("option").First()
			}
			val, _ := sel.Attr("value")
			v.Add(name, val)
		default:
			typ, _ := s.Attr("type")
			if typ == "radio" || typ == "checkbox" {
				if _, checked := s.Attr("checked"); !checked {
					return
				}
			}
			if typ == "submit" || typ == "button" {
				return
			}
			val, _ := s.Attr("value")
			v.Add(name, val)
		}
	})
	return v
}

// createConnection adds a connection through the store, as the API would.
func (d *dash) createConnection(t *testing.T, name string, overrides string) store.Connection {
	t.Helper()
	c, err := d.store.CreateConnection(t.Context(), store.ActorSystem, store.ConnectionInput{
		Name: name, Provider: "zai", APIStyle: "openai", BaseURL: "https://api.z.ai/api/paas/v4",
		APIKey: "sk-test-0123456789abcdef", Models: []string{"glm-5", "glm-4.7"}, Enabled: true,
		RateLimitOverrides: json.RawMessage(overrides),
	})
	if err != nil {
		t.Fatalf("create connection %s: %v", name, err)
	}
	return c
}

// overrides reads a connection's stored overrides.
func (d *dash) overrides(t *testing.T, id string) map[string]any {
	t.Helper()
	c, err := d.store.GetConnection(t.Context(), id)
	if err != nil {
		t.Fatalf("get connection: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(c.RateLimitOverrides, &m); err != nil {
		t.Fatalf("decode overrides: %v", err)
	}
	return m
}

// settings returns the stored settings document.
func (d *dash) settings(t *testing.T) map[string]any {
	t.Helper()
	st, err := d.store.GetSettings(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(st.Data, &got); err != nil {
		t.Fatal(err)
	}
	return got
}
