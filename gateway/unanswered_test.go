package gateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

const okChat = `{"id":"c","object":"chat.completion","model":"glm-5","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`

// dropSecond is an upstream over raw TCP that answers the first request on
// each connection (keep-alive) and, for the second, reads it whole and
// closes the connection without a byte of answer.
type dropSecond struct {
	ln       net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	open     []net.Conn
	conns    atomic.Int64 // connections accepted
	requests atomic.Int64 // requests read whole
	dropped  atomic.Int64 // of them, dropped unanswered
}

func newDropSecond(t *testing.T) *dropSecond {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dropSecond{ln: ln}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.conns.Add(1)
			d.mu.Lock()
			d.open = append(d.open, c)
			d.mu.Unlock()
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; ; n++ {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					d.requests.Add(1)
					if n == 1 {
						d.dropped.Add(1)
						return
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+
						strconv.Itoa(len(okChat))+"\r\n\r\n"+okChat)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		d.mu.Lock()
		for _, c := range d.open {
			_ = c.Close()
		}
		d.mu.Unlock()
		d.wg.Wait()
	})
	return d
}

// TestUnansweredAfterWriteNotResent: an upstream that read a request whole
// on a reused connection and closed it without answering gets it exactly
// once, and the client gets 502 UPSTREAM_UNAVAILABLE (issue 24, finding 1:
// the fasthttp client sent it again on another connection, a double charge).
// With Idempotency-Key it goes again once, on a fresh connection.
func TestUnansweredAfterWriteNotResent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	up := newDropSecond(t)
	e.gw.Apply(Config{Connections: []Connection{{ID: "a", Name: "conn-a", Provider: "zai", APIStyle: "openai",
		BaseURL: "http://" + up.ln.Addr().String() + "/v1", APIKey: "ka", Models: []string{"glm-5"}, Enabled: true}}})
	ctx := testCtx(t)

	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a") // pools the connection
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
	if r.status != http.StatusBadGateway {
		t.Fatalf("dropped request: status %d, want 502: %s", r.status, r.body)
	}
	checkShape(t, r, "openai", CodeUpstreamError)
	if got := up.requests.Load(); got != 2 {
		t.Fatalf("upstream read %d requests, want 2 (the dropped one exactly once)", got)
	}
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("health after one dropped request = %q, want ok", h.Health)
	}

	// With Idempotency-Key: once more, on a connection of its own.
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a")
	conns := up.conns.Load()
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), "Idempotency-Key", "k-1"), "conn-a")
	if got := up.dropped.Load(); got != 2 {
		t.Fatalf("upstream dropped %d requests, want 2", got)
	}
	if got := up.requests.Load(); got != 5 {
		t.Errorf("upstream read %d requests, want 5 (the idempotent one twice)", got)
	}
	if got := up.conns.Load() - conns; got != 1 {
		t.Errorf("the retry used %d new connections, want 1", got)
	}
}

// restartable is an upstream whose process can be restarted on the same
// address: every connection it had is closed, and new ones reach a fresh
// server. Its handler holds requests until hold of them are in at once.
type restartable struct {
	t    *testing.T
	addr string
	srv  *http.Server
	hold atomic.Int64
	in   atomic.Int64
	gate chan struct{}
}

func (u *restartable) start() {
	ln, err := net.Listen("tcp", u.addr)
	if err != nil {
		u.t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	u.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if h := u.hold.Load(); h > 0 {
			if u.in.Add(1) == h {
				close(u.gate)
			}
			select {
			case <-u.gate:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, okChat)
	})}
	go func() { _ = u.srv.Serve(ln) }()
}

// TestStalePoolAfterUpstreamRestart: a pool of 20 connections, the
// upstream restarted; the next 20 requests all succeed and the breaker
// stays closed (issue 24, finding 2: 502 × 5 then 503, the one retry took
// another dead pooled connection, and stale failures opened the breaker).
// It runs on the default client, fasthttp, whatever -outbound says:
// net/http's Transport learns of a closed idle connection from its
// background read, and a POST that takes the connection before that read
// has seen the close fails (it is not replayable), a window this test hits.
func TestStalePoolAfterUpstreamRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Outbound = OutboundFastHTTP })
	u := &restartable{t: t, addr: "127.0.0.1:0", gate: make(chan struct{})}
	u.hold.Store(20)
	u.start()
	t.Cleanup(func() { _ = u.srv.Close() })
	e.gw.Apply(Config{Settings: limits.Settings{}, Connections: []Connection{{ID: "a", Name: "conn-a", Provider: "zai",
		APIStyle: "openai", BaseURL: "http://" + u.addr + "/v1", APIKey: "ka", Models: []string{"glm-5"}, Enabled: true}}})
	ctx := testCtx(t)

	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a")
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Restart: every pooled connection is closed by the old process.
	u.hold.Store(0)
	_ = u.srv.Close()
	u.start()

	for i := range 20 {
		r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false))
		if r.status != http.StatusOK {
			t.Errorf("request %d after the restart: status %d: %s", i, r.status, r.body)
		}
	}
	if h := e.health("a"); h.Health != live.HealthOK {
		t.Errorf("health after the restart = %q (%s), want ok", h.Health, h.Reason)
	}
}

// TestClientQueryNotForwarded: the client's query string does not reach
// the upstream (issue 24, finding 10: it was forwarded verbatim).
func TestClientQueryNotForwarded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{RecordHeaders: true})
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "glm-5")}})
	expectVia(t, e.post(testCtx(t), "/v1/chat/completions?x=1&api-version=2", chatBody("glm-5", false)), "conn-a")
	uris := e.up.ReceivedURIs()
	if len(uris) != 1 || uris[0] != "/v1/chat/completions" {
		t.Errorf("upstream got %q, want [/v1/chat/completions]", uris)
	}
}
