package cluster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

var benchKeys = []string{
	"global",
	"provider:zai",
	"connection:6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41",
	"model:6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41:glm-5",
}

func benchController(b *testing.B) *Controller {
	b.Helper()
	c := newController(b, newClient(b, shared.sock), Options{Prefix: uniquePrefix(b)})
	c.SetCaps(map[string]int{benchKeys[0]: 1000, benchKeys[1]: 500, benchKeys[2]: 100, benchKeys[3]: 50})
	return c
}

// BenchmarkAcquireRelease: an uncontended 4-gate acquire and release,
// two round trips to a local Redis (unix socket).
func BenchmarkAcquireRelease(b *testing.B) {
	c := benchController(b)
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second, Client: "k1"}
	stats := shared.client(b)
	b.ReportAllocs()
	before := commandStats(b, stats)
	for b.Loop() {
		p, err := c.Acquire(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
	reportRedisCost(b, before, commandStats(b, stats))
}

// reportRedisCost reports Redis's side of each op: microseconds inside
// scripts (INFO commandstats) and the commands the scripts ran.
func reportRedisCost(b *testing.B, before, after map[string]cmdStat) {
	usec, scripts, cmds := scriptCost(before, after, b.N)
	b.ReportMetric(usec, "redis-µs/op")
	b.ReportMetric(scripts, "scripts/op")
	b.ReportMetric(cmds, "redis-cmds/op")
}

// BenchmarkAcquireReleaseParallel: the same from many goroutines of one
// replica, below every cap.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	acquireParallel(b, benchController(b), 4, admission.Grant.Release)
}

// BenchmarkAcquireReleaseSoonParallel: many goroutines of one replica admit
// and give back with ReleaseSoon, as the gateway does, below every cap; it
// reports the round trips (pipelines and single commands) per request.
func BenchmarkAcquireReleaseSoonParallel(b *testing.B) {
	rdb := newClient(b, shared.sock)
	trips := &roundTrips{}
	rdb.AddHook(trips)
	c := newController(b, rdb, Options{Prefix: uniquePrefix(b)})
	c.SetCaps(map[string]int{benchKeys[0]: 1000, benchKeys[1]: 500, benchKeys[2]: 100, benchKeys[3]: 50})
	trips.take()
	acquireParallel(b, c, 8, func(g admission.Grant) { g.(admission.SoonReleaser).ReleaseSoon() })
	b.ReportMetric(float64(trips.take())/float64(b.N), "round-trips/op")
}

// acquireParallel admits the four-gate bench path from parallelism
// goroutines per processor and gives each permit back with giveBack.
func acquireParallel(b *testing.B, c *Controller, parallelism int, giveBack func(admission.Grant)) {
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second}
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := c.Acquire(b.Context(), req)
			if err != nil {
				b.Error(err)
				return
			}
			giveBack(p)
		}
	})
}

// BenchmarkPing is the floor: two PINGs, the same round trips with no work.
func BenchmarkPing(b *testing.B) {
	rdb := newClient(b, shared.sock)
	for b.Loop() {
		for range 2 {
			if err := rdb.Ping(b.Context()).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLocal is the in-process controller through admission.Local.
func BenchmarkLocal(b *testing.B) {
	c := admission.Local{C: admission.New(admission.Options{})}
	c.SetCaps(map[string]int{benchKeys[0]: 1000, benchKeys[1]: 500, benchKeys[2]: 100, benchKeys[3]: 50})
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Acquire(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

// BenchmarkLimits: one call of each shared-limits script on a local Redis
// (unix socket).
func BenchmarkLimits(b *testing.B) {
	lim, err := NewLimits(LimitsOptions{Client: newClient(b, shared.sock), Prefix: uniquePrefix(b)})
	if err != nil {
		b.Fatal(err)
	}
	const conn = "6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41"
	benches := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{name: "view", call: func(ctx context.Context) error { _, err := lim.View(ctx, conn, 1000); return err }},
		{name: "reserveTurn", call: func(ctx context.Context) error {
			_, _, err := lim.ReserveTurn(ctx, conn, time.Nanosecond, 0)
			return err
		}},
		{name: "addTokens", call: func(ctx context.Context) error { return lim.AddTokens(ctx, conn, 1<<40, 1) }},
		{name: "coolDown", call: func(ctx context.Context) error { return lim.CoolDown(ctx, conn, "glm-5", time.Second) }},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bb.call(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGatewayShared: one request at a time through a gateway on a
// cluster controller, with and without shared limits, for a connection
// without rate limits (the shared read of cooldowns, cached 250 ms, is all
// that changes) and one with tpm (plus one charge per response).
func BenchmarkGatewayShared(b *testing.B) {
	for _, shared := range []bool{false, true} {
		for _, tpm := range []bool{false, true} {
			name := "local"
			if shared {
				name = "shared"
			}
			if tpm {
				name += "/tpm"
			} else {
				name += "/plain"
			}
			b.Run(name, func(b *testing.B) { benchGateway(b, shared, tpm) })
		}
	}
}

func benchGateway(b *testing.B, withShared, tpm bool) {
	prefix := uniquePrefix(b)
	rdb := newClient(b, shared.sock)
	ctrl := newController(b, rdb, Options{Prefix: prefix})
	opts := gateway.Options{Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
		return gateway.ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}, Admission: ctrl}
	if withShared {
		lim, err := NewLimits(LimitsOptions{Client: rdb, Prefix: prefix})
		if err != nil {
			b.Fatal(err)
		}
		opts.SharedLimits = lim
	}
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(up)
	gw := gateway.New(opts)
	srv := httptest.NewServer(gw)
	tr := &http.Transport{}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = up.Close()
		srv.Close()
		gw.Close()
		upSrv.Close()
	})
	var o limits.Overrides
	if tpm {
		o.TPM = ptr(int64(100_000_000))
	}
	gw.Apply(gateway.Config{Connections: []gateway.Connection{{ID: "a", Name: "conn-a", Provider: "zai",
		APIStyle: "openai", BaseURL: upSrv.URL + "/v1", APIKey: "ka", Models: []string{"m"}, Enabled: true, Overrides: o}}})
	hc := &http.Client{Transport: tr}
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(b.Context(), http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testClientKey)
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
