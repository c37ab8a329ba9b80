package handlers

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// Every path under /v1, /v1 itself included, goes to the gateway, which answers in the
// client APIs' own shapes (never ServeMux's HTML redirect).
func TestGatewayGetsEveryV1Path(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	st, err := store.New(storetest.Pool(t), testSecretKey, logger)
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	gw := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Reached", r.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(New(Deps{Store: st, Logger: logger, Gateway: gw}).Handler())
	t.Cleanup(srv.Close)
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	for _, path := range []string{"/v1", "/v1/", "/v1/models", "/v1/chat/completions", "/v1beta", "/v1beta/", "/v1beta/models", "/v1beta/nope"} {
		t.Run(path, func(t *testing.T) {
			res, err := client.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusTeapot || res.Header.Get("X-Reached") != path {
				t.Errorf("GET %s = %d (reached %q), want the gateway's 418 for %s", path, res.StatusCode, res.Header.Get("X-Reached"), path)
			}
		})
	}
}
