package handlers

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
)

func TestPprofNeedsAdminToken(t *testing.T) {
	a := newTestAPI(t, apiOptions{})
	tests := []struct {
		name   string
		path   string
		token  string // noToken sends none
		status int
	}{
		{name: "no token", path: "/debug/pprof/cmdline", token: noToken, status: http.StatusUnauthorized},
		{name: "unknown token", path: "/debug/pprof/cmdline", token: "not-a-token-at-all", status: http.StatusUnauthorized},
		{name: "viewer token", path: "/debug/pprof/cmdline", token: a.viewer, status: http.StatusForbidden},
		{name: "viewer token on the index", path: "/debug/pprof/", token: a.viewer, status: http.StatusForbidden},
		{name: "viewer token on a named profile", path: "/debug/pprof/heap", token: a.viewer, status: http.StatusForbidden},
		{name: "admin token", path: "/debug/pprof/cmdline", token: a.admin, status: http.StatusOK},
		{name: "admin token on the index", path: "/debug/pprof/", token: a.admin, status: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, a.srv.URL+tt.path, nil)
			if err != nil {
				t.Fatalf("new request: %v", err)
			}
			if tt.token != noToken {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			res, err := a.srv.Client().Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", tt.path, err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatalf("read body: %v", err)
			}
			if res.StatusCode != tt.status {
				t.Fatalf("GET %s: status = %d, want %d; body: %s", tt.path, res.StatusCode, tt.status, body)
			}
			if tt.status != http.StatusOK {
				if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, httpkit.ProblemContentType) {
					t.Errorf("refusal Content-Type = %q, want %s", ct, httpkit.ProblemContentType)
				}
				if strings.Contains(string(body), "handlers.test") {
					t.Errorf("refusal leaks the command line: %s", body)
				}
			}
			if tt.status == http.StatusOK && strings.HasSuffix(tt.path, "cmdline") && !strings.Contains(string(body), "handlers.test") {
				t.Errorf("cmdline = %q, want the test binary's command line", body)
			}
		})
	}
}
