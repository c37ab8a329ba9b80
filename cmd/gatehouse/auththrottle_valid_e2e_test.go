package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestValidBearerServedFromThrottledAddress: once one stale agent behind a NAT has
// sent 20 invalid secrets and its address is throttled (429 for the next invalid
// one), a valid client key, API token or metrics token from that same address is
// served at once on /v1, /api/v1 and /metrics; invalid ones stay 429.
func TestValidBearerServedFromThrottledAddress(t *testing.T) {
	t.Parallel()
	p := startServe(t, privateDir(t, nil), nil, []string{
		"GATEHOUSE_DATABASE_URL=" + storetest.URL(t),
		"GATEHOUSE_SECRET_KEY=" + store.GenerateSecretKey(),
		"GATEHOUSE_BOOTSTRAP_API_TOKEN=" + e2eToken,
		"GATEHOUSE_BOOTSTRAP_CLIENT_KEY=" + e2eClientKey,
		"GATEHOUSE_TRUSTED_PROXIES=127.0.0.1/32",
	})
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path, from, secret string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("X-Forwarded-For", from)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for i, tc := range []struct{ name, path, valid string }{
		{"gateway", "/v1/models", e2eClientKey},
		{"REST API", "/api/v1/connections", e2eToken},
		{"metrics", "/metrics", e2eToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nat := fmt.Sprintf("10.8.%d.1", i)
			for n := 1; n <= 20; n++ {
				if st, body := get(tc.path, nat, fmt.Sprintf("stale-%d-0123456789abcdef", n)); st != http.StatusUnauthorized {
					t.Fatalf("invalid secret %d: status %d, want 401: %s", n, st, body)
				}
			}
			if st, body := get(tc.path, nat, "stale-21-0123456789abcdef"); st != http.StatusTooManyRequests {
				t.Fatalf("invalid secret 21: status %d, want 429: %s", st, body)
			}
			for n := range 3 {
				if st, body := get(tc.path, nat, tc.valid); st != http.StatusOK {
					t.Errorf("valid secret %d from the throttled address: status %d, want 200: %s", n, st, body)
				}
			}
			if st, body := get(tc.path, nat, "stale-22-0123456789abcdef"); st != http.StatusTooManyRequests {
				t.Errorf("invalid secret after the valid ones: status %d, want 429 still: %s", st, body)
			}
		})
	}
}
