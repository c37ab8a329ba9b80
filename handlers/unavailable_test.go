package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
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
