package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// BenchmarkQueuedWaiter measures what one queued request holds: goroutine
// stack and heap in use per waiter, with 1 000 requests queued on a cap-1
// gate (each on its own client connection, written raw so that no client
// goroutine counts), after two GCs. "handler" is the floor: a bare net/http
// handler that reads its body and parks on the request context, the same
// work net/http's server does for a queued request before the gateway's
// own. Run with:
//
//	go test -run '^$' -bench QueuedWaiter -benchtime 1x ./gateway/
func BenchmarkQueuedWaiter(b *testing.B) {
	const n = 1000
	b.Run("handler", func(b *testing.B) {
		var parked atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			parked.Add(1)
			<-r.Context().Done()
			parked.Add(-1)
		})
		for b.Loop() {
			measureWaiters(b, h, n, func() int { return int(parked.Load()) })
		}
	})
	b.Run("gateway", func(b *testing.B) {
		up := upstreamtest.NewServer(upstreamtest.Options{})
		upSrv := httptest.NewServer(up)
		defer upSrv.Close()
		defer up.Close()
		hold := make(chan struct{})
		defer close(hold)
		if err := up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
			b.Fatal(err)
		}
		gw := New(Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
			return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
		}})
		defer gw.Close()
		gw.Apply(Config{Connections: []Connection{{
			ID: "c1", Name: "c1", Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
			APIKey: "k1", Models: []string{"glm-5"}, Enabled: true,
			Overrides: caps(1, map[string]int{"glm-5": 1}, 120000),
		}}})
		mux := http.NewServeMux() // as in production (handlers.Server)
		mux.Handle("/v1/", gw)
		queued := func() int {
			q := 0
			for _, g := range gw.Snapshot().Gates {
				q += g.Queued
			}
			return q
		}
		for b.Loop() {
			measureWaiters(b, mux, n, queued)
		}
	})
}

// measureWaiters sends n requests to h on their own connections, waits until
// n-1 are queued (one may be in flight), and reports stack and heap in use
// per request.
func measureWaiters(b *testing.B, h http.Handler, n int, queued func() int) {
	b.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	body := chatBody("glm-5", false)
	raw := []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer " + testClientKey +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write(raw); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for queued() < n-1 {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d queued after a minute", queued(), n)
		}
		time.Sleep(5 * time.Millisecond) // polling a benchmark's setup, not a test's synchronisation
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.StackInuse-before.StackInuse)/float64(n), "stack-B/waiter")
	b.ReportMetric(float64(runtime.NumGoroutine())/float64(n), "goroutines/waiter")
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(n), "heap-B/waiter")
}
