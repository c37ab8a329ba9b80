package handlers

import (
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDashCompressed: a browser that accepts gzip gets the dashboard's pages (the
// 404 page too) and its assets gzipped — smaller, the same bytes once unpacked, with
// Vary: Accept-Encoding on both answers; one that does not gets them plain. The
// gateway's answers, a stream above all, are never compressed.
func TestDashCompressed(t *testing.T) {
	t.Parallel()
	d := newTrafficDash(t)
	c := d.signIn(t, "viewer@example.com")
	// raw fetches path with accept-encoding, unpacking nothing itself.
	raw := func(method, path, acceptEncoding, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, d.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if acceptEncoding != "" {
			req.Header.Set("Accept-Encoding", acceptEncoding)
		}
		if strings.HasPrefix(path, "/v1/") {
			req.Header.Set("Authorization", "Bearer "+trafficClientKey)
			req.Header.Set("Content-Type", "application/json")
		}
		client := &http.Client{Jar: c.Jar, Transport: &http.Transport{DisableCompression: true}}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res, b
	}
	css := d.get(t, c, "/").doc.Find(`link[rel="stylesheet"]`).AttrOr("href", "")
	if css == "" {
		t.Fatal("no stylesheet on the overview")
	}
	for _, path := range []string{"/", "/requests", "/usage", "/no-such-page", css} {
		plain, plainBody := raw(http.MethodGet, path, "", "")
		zipped, zippedBody := raw(http.MethodGet, path, "gzip, deflate, br", "")
		if zipped.StatusCode != plain.StatusCode || zipped.Header.Get("Content-Encoding") != "gzip" || plain.Header.Get("Content-Encoding") != "" {
			t.Errorf("%s: %d %q with gzip accepted, %d %q without; want gzip only when accepted", path,
				zipped.StatusCode, zipped.Header.Get("Content-Encoding"), plain.StatusCode, plain.Header.Get("Content-Encoding"))
			continue
		}
		for _, res := range []*http.Response{plain, zipped} {
			if !strings.Contains(strings.Join(res.Header.Values("Vary"), ","), "Accept-Encoding") {
				t.Errorf("%s: Vary %q, want Accept-Encoding", path, res.Header.Values("Vary"))
			}
		}
		zr, err := gzip.NewReader(strings.NewReader(string(zippedBody)))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		unpacked, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(zippedBody) >= len(plainBody) || len(unpacked) == 0 {
			t.Errorf("%s: %d bytes gzipped, %d plain (%d unpacked)", path, len(zippedBody), len(plainBody), len(unpacked))
		}
		if path == css && string(unpacked) != string(plainBody) {
			t.Errorf("%s: the unpacked stylesheet differs from the plain one", path)
		}
	}

	for _, stream := range []bool{false, true} {
		body := `{"model":"glm-5","messages":[{"role":"user","content":"` + strings.Repeat("hello ", 400) + `"}]}`
		if stream {
			body = strings.Replace(body, `{"model"`, `{"stream":true,"model"`, 1)
		}
		res, b := raw(http.MethodPost, "/v1/chat/completions", "gzip", body)
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Encoding") != "" {
			t.Errorf("gateway (stream %v): %d %q, want 200 uncompressed", stream, res.StatusCode, res.Header.Get("Content-Encoding"))
		}
		if stream && !strings.Contains(string(b), "data: ") {
			t.Errorf("gateway stream: %q, want server-sent events as sent", b)
		}
	}
}
