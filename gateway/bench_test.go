package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// BenchmarkProxy measures a proxied request end to end over loopback: the
// client, the gateway and the fake upstream all run in this process, so
// ns/op and allocs/op include all three. "direct" is the same client talking
// to the upstream without the gateway, the baseline for the overhead.
// Run with: go test -run '^$' -bench BenchmarkProxy -benchmem ./gateway/
func BenchmarkProxy(b *testing.B) {
	up := upstreamtest.NewServer(upstreamtest.Options{Chunks: 8})
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	defer up.Close()
	gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}})
	defer gw.Close()
	observed := caps(256, map[string]int{"glm-observed": 256}, 60000)
	observed.Adaptive = ptr(true)
	observed.Shadow = &limits.ShadowCaps{MaxConcurrent: ptr(4), ModelConcurrency: map[string]int{"glm-observed": 2}}
	gw.Apply(Config{Connections: []Connection{{
		ID: "c1", Name: "bench", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
		Overrides: caps(256, map[string]int{"glm-5": 256}, 60000),
	}, {
		// Adaptive, with shadow caps on the connection and the model: the
		// cost of the learner and the shadow gates on the request path.
		ID: "c2", Name: "bench-observed", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "upstream-key-2", Models: []string{"glm-observed"}, Enabled: true, Overrides: observed,
	}}})
	gwSrv := httptest.NewServer(gw)
	defer gwSrv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	cases := []struct {
		name, base, model string
		stream            bool
		key               string
	}{
		{name: "direct", base: upSrv.URL + "/v1", model: "glm-5", key: "upstream-key"},
		{name: "plain", base: gwSrv.URL + "/v1", model: "glm-5", key: testClientKey},
		{name: "alias", base: gwSrv.URL + "/v1", model: "zai/glm-5", key: testClientKey},
		{name: "adaptive-shadow", base: gwSrv.URL + "/v1", model: "glm-observed", key: testClientKey},
		{name: "direct-stream", base: upSrv.URL + "/v1", model: "glm-5", stream: true, key: "upstream-key"},
		{name: "stream", base: gwSrv.URL + "/v1", model: "glm-5", stream: true, key: testClientKey},
	}
	for _, bc := range cases {
		body := chatBody(bc.model, bc.stream)
		url := bc.base + "/chat/completions"
		b.Run(bc.name, func(b *testing.B) {
			benchPost(b, client, url, bc.key, body)
		})
	}
}

// benchPost posts body to url with the client key key from 8 goroutines per
// CPU (16 concurrent clients on 2 cores) until the benchmark is done; every
// answer must be 200.
func benchPost(b *testing.B, client *http.Client, url, key, body string) {
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}
