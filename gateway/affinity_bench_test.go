package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// BenchmarkAffinity measures the uncontended request path of an agent's turn
// (a 6th turn of about 20 KB with a session id, on /v1/messages) through two
// gateways, one whose connections take part in affinity and one whose
// connections opt out (affinity: false), over loopback with the fake
// upstream in this process. Requests alternate between the two within one
// loop, so both see the same machine; each side reports cpu-ns/op, the
// process's user and system CPU time around its requests (getrusage), which
// counts the client, the gateway and the upstream alike, so only the
// difference is the gateway's. Run: go test -run '^$' -bench
// BenchmarkAffinity -benchtime 4000x -count 3 ./gateway/
func BenchmarkAffinity(b *testing.B) {
	body := agentBody(agentSystem(1), 6)
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	defer up.Close()
	e := &env{upURL: upSrv.URL}
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var urls [2]string
	for i, on := range []bool{true, false} {
		gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
			return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
		}})
		defer gw.Close()
		gw.Apply(Config{Connections: []Connection{e.anthropicConn("a", 256, on), e.anthropicConn("b", 256, on)}})
		gwSrv := httptest.NewServer(gw)
		defer gwSrv.Close()
		urls[i] = gwSrv.URL
	}
	send := func(url string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testClientKey)
		req.Header.Set(session.HeaderClaudeCode, "bench-session")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	send(urls[0]) // the first turn binds
	send(urls[1])
	var cpu [2]time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		side := i % 2
		t0 := cpuTime()
		send(urls[side])
		cpu[side] += cpuTime() - t0
	}
	n := float64(max(b.N/2, 1))
	on, off := float64(cpu[0].Nanoseconds())/n, float64(cpu[1].Nanoseconds())/n
	b.ReportMetric(on, "on-cpu-ns/req")
	b.ReportMetric(off, "off-cpu-ns/req")
	b.ReportMetric(on-off, "extra-cpu-ns/req")
}

// BenchmarkAffinityPath is the gateway's own affinity work for one request
// of a bound session, without the HTTP around it: the affinity key over a
// 20 KB body's system prompt, tools and first message, the binding's lookup
// and its refresh on success. "off" is what a request pays when no
// connection takes part in affinity (the session hash for the request log).
func BenchmarkAffinityPath(b *testing.B) {
	body := []byte(agentBody(agentSystem(1), 6))
	// The body scan runs with affinity on or off alike; its marking of the
	// ranges is measured by the usage package's scan benchmarks.
	info, err := usage.Scan(body)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("on", func(b *testing.B) {
		bs := session.NewBindings(5*time.Minute, 100_000)
		now := time.Unix(1_700_000_000, 0)
		b.ReportAllocs()
		for b.Loop() {
			_ = session.Hash("test-key", "bench-session")
			sys, tools, first := info.Parts(body)
			k := session.KeyOf("test-key", info.Model, "bench-session", session.HashPrompt(sys, tools, first))
			bs.Get(k, now)
			bs.Put(k, "a", now)
		}
	})
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = session.Hash("test-key", "bench-session")
		}
	})
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAffinityRequest is one gateway request end to end (client,
// gateway and fake upstream in this process, over loopback), one gateway
// per sub-benchmark: "oneoff" is the independent load tool's request (one
// message on /v1/chat/completions, no session id), "agent" an agent's 6th
// turn of about 20 KB with a session id on /v1/messages; "on" with the
// connections taking part in affinity, "off" with them opted out. Its
// figure is for instruction counts, which the machine's load does not move:
// run the test binary under valgrind --tool=callgrind (GODEBUG=asyncpreemptoff=1)
// at two -test.benchtime counts and divide the difference of the totals by
// the difference of the counts; on − off is what affinity costs a request.
func BenchmarkAffinityRequest(b *testing.B) {
	oneoff := `{"model":"perf-model","messages":[{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":32,"stream":false}`
	for _, kind := range []string{"oneoff", "agent"} {
		for _, on := range []bool{true, false} {
			name := kind + "/off"
			if on {
				name = kind + "/on"
			}
			b.Run(name, func(b *testing.B) {
				up := upstreamtest.NewServer(upstreamtest.Options{})
				upSrv := httptest.NewServer(up)
				defer upSrv.Close()
				defer up.Close()
				e := &env{upURL: upSrv.URL}
				gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
					return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
				}})
				defer gw.Close()
				conns := []Connection{e.anthropicConn("a", 256, on), e.anthropicConn("b", 256, on)}
				path, body, sid := "/v1/messages", agentBody(agentSystem(1), 6), "bench-session"
				if kind == "oneoff" {
					path, body, sid = "/v1/chat/completions", oneoff, ""
					for i := range conns {
						conns[i].APIStyle, conns[i].Provider, conns[i].Models = "openai", "zai", []string{"perf-model"}
					}
				}
				gw.Apply(Config{Connections: conns})
				gwSrv := httptest.NewServer(gw)
				defer gwSrv.Close()
				tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr}
				send := func() {
					req, _ := http.NewRequest(http.MethodPost, gwSrv.URL+path, strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+testClientKey)
					if sid != "" {
						req.Header.Set(session.HeaderClaudeCode, sid)
					}
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("status %d", resp.StatusCode)
					}
				}
				send() // the first turn binds
				for b.Loop() {
					send()
				}
			})
		}
	}
}
