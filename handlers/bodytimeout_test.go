package handlers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

const bodyTestClientKey = "body-timeout-client-key-0123456789"

// newBodyTimeoutServer serves every route (dashboard, API, gateway with one connection
// to a fake upstream whose streams last about 600 ms) with a body read bound of
// 200 ms, and returns its address and an admin API token.
func newBodyTimeoutServer(t *testing.T) (addr, admin string) {
	t.Helper()
	st, err := store.New(storetest.Pool(t), testSecretKey, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err = st.CreateAPIToken(t.Context(), store.ActorSystem, "admin", store.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	up := upstreamtest.NewServer(upstreamtest.Options{Chunks: 12, ChunkInterval: 50 * time.Millisecond})
	upSrv := httptest.NewServer(up)
	gw := gateway.New(gateway.Options{Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
		return gateway.ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == bodyTestClientKey
	}})
	gw.Apply(gateway.Config{Connections: []gateway.Connection{{
		ID: "c1", Name: "c1", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
	}}})
	srv := httptest.NewServer(New(Deps{Store: st, SecretKey: testSecretKey, Gateway: gw,
		Metrics: http.NotFoundHandler(), BodyReadTimeout: 200 * time.Millisecond}).Handler())
	t.Cleanup(func() {
		_ = up.Close()
		srv.Close()
		gw.Close()
		upSrv.Close()
	})
	return srv.Listener.Addr().String(), admin
}

// TestHalfSentBodyGets408: a request whose body stops half way gets 408 once the body
// read bound runs out, and its connection is closed, on the dashboard, the API and the
// gateway, each in its own error shape; a body that arrives in time is not cut off
// with its long streaming answer.
func TestHalfSentBodyGets408(t *testing.T) {
	t.Parallel()
	addr, admin := newBodyTimeoutServer(t)
	tests := []struct {
		name, path, contentType, auth string
		body                          string // sent in full; only its first half goes out
		wantType                      string // Content-Type of the 408
	}{
		{name: "dashboard sign-in", path: "/login", contentType: "application/x-www-form-urlencoded",
			body: "email=admin%40localhost&password=abcdefgh", wantType: "text/html"},
		{name: "REST API", path: "/api/v1/connections", contentType: "application/json", auth: "Bearer " + admin,
			body: `{"name":"x","provider":"zai","apiStyle":"openai"}`, wantType: "application/problem+json"},
		{name: "gateway", path: "/v1/chat/completions", contentType: "application/json", auth: "Bearer " + bodyTestClientKey,
			body: `{"model":"glm-5","messages":[{"role":"user","content":"hi"}]}`, wantType: "application/json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// A bound for the test itself, far past the server's 200 ms: the server's
			// answer is what is asserted, not the time it took.
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n",
				tc.path, addr, tc.contentType, len(tc.body))
			if tc.auth != "" {
				head += "Authorization: " + tc.auth + "\r\n"
			}
			if _, err := io.WriteString(conn, head+"\r\n"+tc.body[:len(tc.body)/2]); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the half-sent body: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Fatalf("status %d, want 408; body %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
				t.Errorf("Content-Type %q, want %s", ct, tc.wantType)
			}
			if !resp.Close {
				t.Error("the 408 does not announce Connection: close")
			}
			if tc.path == "/v1/chat/completions" && !strings.Contains(string(body), `"code":"REQUEST_TIMEOUT"`) {
				t.Errorf("gateway body %s, want code REQUEST_TIMEOUT", body)
			}
			if n, err := br.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
				t.Errorf("after the 408 the connection gave %d bytes, %v; want it closed (EOF)", n, err)
			}
		})
	}
	t.Run("long stream after a full body", func(t *testing.T) {
		t.Parallel()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+"/v1/chat/completions",
			strings.NewReader(`{"model":"glm-5","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+bodyTestClientKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
			t.Errorf("stream outlasting the body bound: status %d, error %v, %d bytes; want 200 to [DONE]\n%s", resp.StatusCode, err, len(b), b)
		}
	})
}
