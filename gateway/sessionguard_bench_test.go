package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSessionGuard measures what the runaway guards add to a request
// that none of them stops, on an agent turn of about 6 KiB: "none" is a
// request without a session (the guard is skipped), "session" one with a
// session whose key sets no guard (the session is only counted for
// /sessions), "guards" one whose key sets all of them (loop fingerprint of
// the last two messages, sessionMaxConcurrent, sessionBudgetUsd reserved and
// settled). One op is the guard's whole part of one request: enter,
// reserve, settle, leave. The extra CPU of configured guards is guards −
// session; cpu-ns/op is the process's CPU time per op, which the machine's
// other load does not stretch. Run with:
//
//	go test -run '^$' -bench BenchmarkSessionGuard -benchtime 20000x -count 5 ./gateway/
func BenchmarkSessionGuard(b *testing.B) {
	clock := newFakeClock()
	budget := limits.Micros(1_000_000_000)
	keys := map[string]ClientKey{
		"sk-off": {ID: "koff", Name: "off", Enabled: true},
		"sk-on": {ID: "kon", Name: "on", Enabled: true, Limits: limits.ClientKeyLimits{SessionMaxConcurrent: ptr(64),
			SessionBudgetUSD: &budget, LoopLimit: ptr(8), LoopWindowMs: ptr(1000)}},
	}
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	gw := New(Options{Outbound: *testOutbound, Now: clock.Now, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		k, ok := keys[s]
		return k, ok
	}})
	defer gw.Close()
	in, out := limits.Micros(1_000_000), limits.Micros(2_000_000)
	gw.Apply(Config{Connections: []Connection{{ID: "c1", Name: "bench", Provider: "zai", APIStyle: "openai",
		BaseURL: upSrv.URL + "/v1", APIKey: "k", Models: []string{"glm-5"}, Enabled: true}},
		ClientKeys: keyConfig(keys), Settings: limits.Settings{Prices: limits.Prices{"glm-5": {Input: &in, Output: &out}}}})

	var turns []toolTurn
	for i := range 6 {
		turns = append(turns, toolTurn{callID: "call_" + strings.Repeat("x", 20) + string(rune('a'+i)), path: "src/file.go",
			result: strings.Repeat("func f() { return nil } // a line of the file\n", 20)})
	}
	bodies := transcript("glm-5", false, turns)
	body := bodies[len(bodies)-1]

	for _, bc := range []struct{ name, secret, session string }{
		{"none", "sk-off", ""}, {"session", "sk-off", "agent-1"}, {"guards", "sk-on", "agent-1"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+bc.secret)
			req.Header.Set("Content-Type", "application/json")
			if bc.session != "" {
				req.Header.Set("X-Gatehouse-Session", bc.session)
			}
			x, aerr := gw.prepare(httptest.NewRecorder(), req)
			if aerr != nil {
				b.Fatalf("prepare: %v", aerr.Message)
			}
			defer x.body.Release(gw.bodyBytes)
			x.cur.t = x.targets[0]
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				clock.Advance(2 * time.Second) // out of the loop window: no loop
				if aerr := x.enterSession(); aerr != nil {
					b.Fatalf("enter: %s", aerr.Message)
				}
				if !x.reserveSession() {
					b.Fatal("reserve refused")
				}
				x.settleSession(ratelimit.Usage{Known: true, Cost: 10})
				x.leaveSession()
			}
			// The process's CPU time per op: on a shared machine ns/op is
			// wall time, stretched by every other process's load.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
