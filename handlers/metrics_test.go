package handlers

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestMetricsNeedAnAPIToken: /metrics (connection names, ids, models, caps, health)
// answers 401 problem+json with a Bearer challenge without an API token or with a
// wrong one, and serves a viewer's token and an admin's.
func TestMetricsNeedAnAPIToken(t *testing.T) {
	t.Parallel()
	st, err := store.New(storetest.Pool(t), testSecretKey, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, viewer, err := st.CreateAPIToken(t.Context(), store.ActorSystem, "viewer", store.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err := st.CreateAPIToken(t.Context(), store.ActorSystem, "admin", store.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "gatehouse_gate_capacity{level=\"connection\",key=\"connection:c1\"} 4\n")
	})
	srv := httptest.NewServer(New(Deps{Store: st, SecretKey: testSecretKey, Metrics: metrics}).Handler())
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"unknown token", "Bearer not-a-token-0123456789", http.StatusUnauthorized},
		{"viewer token", "Bearer " + viewer, http.StatusOK},
		{"admin token", "Bearer " + admin, http.StatusOK},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		leaked := strings.Contains(string(b), "connection:c1")
		if tc.want == http.StatusUnauthorized {
			if leaked || resp.Header.Get("Content-Type") != httpkit.ProblemContentType || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: Content-Type %q, WWW-Authenticate %q, metrics in the body: %v; want a problem with a challenge, nothing else",
					tc.name, resp.Header.Get("Content-Type"), resp.Header.Get("WWW-Authenticate"), leaked)
			}
		} else if !leaked {
			t.Errorf("%s: body %q, want the metrics", tc.name, b)
		}
	}
}
