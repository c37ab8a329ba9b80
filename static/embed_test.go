package static

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func newAssets(t *testing.T) *Assets {
	t.Helper()
	a, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func TestPathIsContentHashed(t *testing.T) {
	t.Parallel()
	a := newAssets(t)
	tests := []struct {
		name string
		file string
		want *regexp.Regexp
	}{
		{name: "css", file: "app.css", want: regexp.MustCompile(`^/static/app\.[0-9a-f]{8}\.css$`)},
		{name: "js", file: "app.js", want: regexp.MustCompile(`^/static/app\.[0-9a-f]{8}\.js$`)},
		{name: "svg", file: "favicon.svg", want: regexp.MustCompile(`^/static/favicon\.[0-9a-f]{8}\.svg$`)},
		{name: "unknown", file: "nope.css", want: regexp.MustCompile(`^/static/nope\.css$`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := a.Path(tt.file); !tt.want.MatchString(got) {
				t.Errorf("Path(%q) = %q, want match %s", tt.file, got, tt.want)
			}
		})
	}
}

func TestPathIsStable(t *testing.T) {
	t.Parallel()
	a, b := newAssets(t), newAssets(t)
	if a.Path("app.css") != b.Path("app.css") {
		t.Errorf("hash differs between two New calls: %q vs %q", a.Path("app.css"), b.Path("app.css"))
	}
	if a.Path("app.css") == a.Path("app.js") {
		t.Errorf("css and js share a path")
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	a := newAssets(t)
	css, js := a.Path("app.css"), a.Path("app.js")
	wrongHash := regexp.MustCompile(`\.[0-9a-f]{8}\.`).ReplaceAllString(css, ".00000000.")
	tests := []struct {
		name        string
		method      string
		path        string
		wantStatus  int
		wantType    string
		wantCache   bool
		wantNonZero bool
	}{
		{name: "css", method: http.MethodGet, path: css, wantStatus: 200, wantType: "text/css; charset=utf-8", wantCache: true, wantNonZero: true},
		{name: "js", method: http.MethodGet, path: js, wantStatus: 200, wantType: "text/javascript; charset=utf-8", wantCache: true, wantNonZero: true},
		{name: "svg", method: http.MethodGet, path: a.Path("favicon.svg"), wantStatus: 200, wantType: "image/svg+xml", wantCache: true, wantNonZero: true},
		{name: "head", method: http.MethodHead, path: css, wantStatus: 200, wantType: "text/css; charset=utf-8", wantCache: true},
		{name: "unhashed name", method: http.MethodGet, path: "/static/app.css", wantStatus: 404},
		{name: "wrong hash", method: http.MethodGet, path: wrongHash, wantStatus: 404},
		{name: "unknown", method: http.MethodGet, path: "/static/evil.00000000.js", wantStatus: 404},
		{name: "outside prefix", method: http.MethodGet, path: strings.TrimPrefix(css, "/static"), wantStatus: 404},
		{name: "traversal", method: http.MethodGet, path: "/static/../embed.go", wantStatus: 404},
		{name: "post", method: http.MethodPost, path: css, wantStatus: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			a.Handler().ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", rec.Code, tt.wantStatus)
			}
			if tt.wantType != "" {
				if got := rec.Header().Get("Content-Type"); got != tt.wantType {
					t.Errorf("Content-Type = %q, want %q", got, tt.wantType)
				}
			}
			cc := rec.Header().Get("Cache-Control")
			if tt.wantCache && cc != "public, max-age=31536000, immutable" {
				t.Errorf("Cache-Control = %q, want immutable one-year", cc)
			}
			if !tt.wantCache && strings.Contains(cc, "immutable") {
				t.Errorf("Cache-Control = %q on a %d answer", cc, rec.Code)
			}
			if tt.wantNonZero && rec.Body.Len() == 0 {
				t.Errorf("empty body")
			}
		})
	}
}

func TestHandlerServesExactContent(t *testing.T) {
	t.Parallel()
	a := newAssets(t)
	want, err := files.ReadFile("app.css")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, a.Path("app.css"), nil))
	if got := rec.Body.String(); got != string(want) {
		t.Errorf("body differs from embedded app.css (%d vs %d bytes)", len(got), len(want))
	}
	etag := rec.Header().Get("ETag")
	req := httptest.NewRequest(http.MethodGet, a.Path("app.css"), nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match %s: status = %d, want 304", etag, rec.Code)
	}
}
