package gateway

import (
	"net"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

func TestZZQueueMemHTTP(t *testing.T) {
	hold := make(chan struct{})
	e := newEnv(t, upstreamtest.Options{})
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(1, map[string]int{"glm-5": 1}, 600000)
	c.Overrides.MaxQueueDepth = ptr(100000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	srv := httptest.NewServer(e.gw)
	defer srv.Close()
	const n = 3000
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()
	body := chatBody("glm-5", false)
	req := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testClientKey +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	addr := strings.TrimPrefix(srv.URL, "http://")
	e.post(t.Context(), "/v1/models", "")
	e.post(t.Context(), "/v1/chat/completions", chatBody("glm-5", false))
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("ZZ_MAXSTACK") != "" {
		debug.SetMaxStack(4096)
	}
	conns := make([]net.Conn, 0, n)
	for range n {
		cn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, cn)
		if _, err := cn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "queued", func() bool { return e.gate("connection:c1").Queued == n-1 })
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	f, _ := os.Create("/tmp/perf/queue-heap.pprof")
	_ = pprof.Lookup("heap").WriteTo(f, 0)
	f.Close()
	t.Logf("goroutines +%d; stack/req %d B; heap/req %d B", runtime.NumGoroutine()-g0,
		(int64(ms1.StackInuse)-int64(ms0.StackInuse))/n, (int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/n)
	for _, cn := range conns {
		cn.Close()
	}
	close(hold)
}
