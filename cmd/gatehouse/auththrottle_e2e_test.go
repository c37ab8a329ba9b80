package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestBearerGuessesThrottled (issue 24, finding 9): on /v1 (client keys), /api/v1
// and /metrics (API tokens), 20 invalid bearer secrets from one client address are
// answered 401 and the 21st 429 with Retry-After, before its secret is checked; a
// valid secret from another address is served meanwhile.
func TestBearerGuessesThrottled(t *testing.T) {
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
	get := func(path, from, header, secret string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if header == "x-api-key" {
			req.Header.Set("x-api-key", secret)
		} else {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		req.Header.Set("X-Forwarded-For", from)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(body)
	}
	for i, tc := range []struct {
		name, path, header, valid, code string
	}{
		{name: "gateway bearer", path: "/v1/models", header: "Authorization", valid: e2eClientKey, code: "AUTH_THROTTLED"},
		{name: "gateway x-api-key", path: "/v1/models", header: "x-api-key", valid: e2eClientKey, code: "AUTH_THROTTLED"},
		{name: "REST API", path: "/api/v1/connections", header: "Authorization", valid: e2eToken},
		{name: "metrics", path: "/metrics", header: "Authorization", valid: e2eToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			guesser, other := fmt.Sprintf("10.9.%d.1", i), fmt.Sprintf("10.9.%d.2", i)
			for n := 1; n <= 20; n++ {
				if st, _, body := get(tc.path, guesser, tc.header, fmt.Sprintf("guess-%d-0123456789abcdef", n)); st != http.StatusUnauthorized {
					t.Fatalf("guess %d: status %d, want 401: %s", n, st, body)
				}
			}
			st, h, body := get(tc.path, guesser, tc.header, "guess-21-0123456789abcdef")
			if st != http.StatusTooManyRequests {
				t.Fatalf("guess 21: status %d, want 429: %s", st, body)
			}
			if ra, err := strconv.Atoi(h.Get("Retry-After")); err != nil || ra < 1 {
				t.Errorf("guess 21: Retry-After %q, want whole seconds ≥ 1", h.Get("Retry-After"))
			}
			if !strings.Contains(body, tc.code) {
				t.Errorf("guess 21: body %s, want code %q", body, tc.code)
			}
			if st, _, body := get(tc.path, other, tc.header, tc.valid); st != http.StatusOK {
				t.Errorf("valid secret from another address: status %d, want 200: %s", st, body)
			}
		})
	}
}
