package handlers

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
	"github.com/gatehouse-dev/gatehouse/web"
)

// TestDatabaseUnavailable: with the database unreachable the API answers 503
// problem+json with Retry-After, not a 500.
func TestDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	// A socket directory with no server in it: every connection attempt fails at once.
	url := "postgres://postgres@/gatehouse?host=" + filepath.Join(t.TempDir(), "nowhere") + "&connect_timeout=2"
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := store.New(pool, make([]byte, store.SecretKeySize), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Deps{Store: st}).Handler())
	t.Cleanup(srv.Close)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/v1/connections", nil)
	req.Header.Set("Authorization", "Bearer gh_at_0123456789abcdef0123")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status = %s, want 503", resp.Status)
	}
	if got := resp.Header.Get("Retry-After"); got == "" {
		t.Error("no Retry-After on 503")
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	var p struct {
		Status int               `json:"status"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if p.Status != http.StatusServiceUnavailable || p.Errors == nil {
		t.Errorf("problem = %+v, want status 503 and an errors array", p)
	}
}

// TestDashboardDatabaseUnavailable: with Postgres stopped under a signed-in user, the
// dashboard answers 503 with Retry-After, as the API does, and a page saying the
// database is away (not a 500 "the error was logged"); once Postgres is back the same
// session works again.
func TestDashboardDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := storetest.Cluster(t)
	pool, err := pgxpool.New(ctx, cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	logger := slog.New(slog.DiscardHandler)
	st, err := store.New(pool, bytes.Repeat([]byte{0x42}, 32), logger)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Deps{Store: st, Logger: logger, Gates: &dashGates{}}).Handler())
	t.Cleanup(srv.Close)
	if _, err := st.CreateUser(ctx, store.ActorSystem, "admin@example.com", dashPassword, store.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	d := &dash{srv: srv, store: st}
	c := d.signIn(t, "admin@example.com")
	d.get(t, c, "/connections").want(t, http.StatusOK)

	if err := cluster.Stop(ctx); err != nil {
		t.Fatalf("stop Postgres: %v", err)
	}
	wantMsg := web.NewLocalizer("en").T("error.unavailable")
	for _, path := range []string{"/", "/connections", "/settings"} {
		p := d.get(t, c, path).want(t, http.StatusServiceUnavailable)
		if got := p.header.Get("Retry-After"); got != "5" {
			t.Errorf("GET %s: Retry-After = %q, want 5 (as the API's 503)", path, got)
		}
		if ct := p.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type = %q, want an HTML page", path, ct)
		}
		if got := strings.TrimSpace(p.testid("error-message").Text()); got != wantMsg {
			t.Errorf("GET %s: error message = %q, want %q", path, got, wantMsg)
		}
	}

	if err := cluster.Start(ctx); err != nil {
		t.Fatalf("start Postgres: %v", err)
	}
	// The pool reconnects on its own; the session, stored in Postgres, is still valid.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := d.get(t, c, "/connections")
		if p.status == http.StatusOK {
			break
		}
		if p.status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after Postgres came back: status %d, want 200\n%s", p.status, p.body)
		}
	}
}
