package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

func TestZZQueueMem(t *testing.T) {
	hold := make(chan struct{})
	e := newEnv(t, upstreamtest.Options{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(1, map[string]int{"glm-5": 1}, 600000)
	c.Overrides.MaxQueueDepth = ptr(100000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	const n = 4000
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()
	body := chatBody("glm-5", false)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+testClientKey)
			r.Header.Set("Content-Type", "application/json")
			e.gw.ServeHTTP(httptest.NewRecorder(), r)
		}()
	}
	waitFor(t, 20*time.Second, "queued", func() bool { return e.gate("connection:c1").Queued == n-1 })
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	t.Logf("goroutines +%d; stack/req %d B; heap/req %d B", runtime.NumGoroutine()-g0,
		(int64(ms1.StackInuse)-int64(ms0.StackInuse))/n, (int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))/n)
	cancel()
	close(hold)
	wg.Wait()
}
