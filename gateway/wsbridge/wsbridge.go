package wsbridge

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// Path is the one path that accepts the upgrade.
const Path = "/v1/responses"

// Gateway is the request flow the bridge hands turns to (*gateway.Gateway).
type Gateway interface {
	// ServeHTTP serves one request: each turn is one.
	http.Handler
	// CheckUpgrade checks the upgrade's client key; on false it has
	// answered the request itself.
	CheckUpgrade(w http.ResponseWriter, r *http.Request) bool
	// MaxBodyBytes bounds a request body, and so a message.
	MaxBodyBytes() int64
	// IdleBound is how long a socket may wait for its next message.
	IdleBound() time.Duration
}

// Options configures a Bridge.
type Options struct {
	// Registerer receives gatehouse_websocket_open; nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives rare errors (default slog.Default()).
	Logger *slog.Logger
}

// Bridge is an http.Handler in front of the gateway: it serves the
// WebSocket upgrade of /v1/responses and passes every other request to the
// gateway unchanged.
type Bridge struct {
	gw   Gateway
	log  *slog.Logger
	open prometheus.Gauge

	mu       sync.Mutex
	stopping bool
	stop     chan struct{} // closed by Shutdown
	sockets  sync.WaitGroup
}

// New returns a Bridge in front of gw.
func New(gw Gateway, opts Options) *Bridge {
	b := &Bridge{
		gw:   gw,
		log:  opts.Logger,
		stop: make(chan struct{}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatehouse_websocket_open",
			Help: "Responses API WebSockets open now (each turn on one is counted as a request by the gateway's own metrics).",
		}),
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(b.open)
	}
	return b
}

// ServeHTTP serves a WebSocket upgrade of /v1/responses and hands every
// other request to the gateway (a plain GET of /v1/responses included,
// which keeps its 405).
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path || r.Method != http.MethodGet || !isUpgrade(r.Header) {
		b.gw.ServeHTTP(w, r)
		return
	}
	b.serveSocket(w, r)
}

// isUpgrade reports whether h asks for a WebSocket upgrade.
func isUpgrade(h http.Header) bool {
	return headerHasToken(h, "Connection", "upgrade") && headerHasToken(h, "Upgrade", "websocket")
}

// headerHasToken reports whether the comma-separated values of header name
// hold token, case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// Shutdown begins a shutdown: idle sockets are closed with 1001 at once, a
// socket mid-turn right after its turn; no socket is accepted any more
// (the gateway answers the upgrade 503 SHUTTING_DOWN once drained). Call it
// with the gateway's Drain. It is idempotent.
func (b *Bridge) Shutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.stopping {
		b.stopping = true
		close(b.stop)
	}
}

// Wait waits until every socket has closed, or ctx is done. A net/http
// server's Shutdown does not wait for them (an upgraded connection is no
// longer the server's), so a shutdown calls it after Shutdown.
func (b *Bridge) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		b.sockets.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serveSocket checks the key, upgrades and runs the socket's turns.
func (b *Bridge) serveSocket(w http.ResponseWriter, r *http.Request) {
	if !b.gw.CheckUpgrade(w, r) {
		return
	}
	b.mu.Lock()
	if b.stopping {
		b.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "Gatehouse is shutting down", http.StatusServiceUnavailable)
		return
	}
	b.sockets.Add(1)
	b.mu.Unlock()
	defer b.sockets.Done()
	// Counted from before the 101 goes out, so that a client that sees its
	// socket open finds it counted.
	b.open.Inc()
	defer b.open.Dec()
	cw := &corkWriter{ResponseWriter: w}
	c, err := websocket.Accept(cw, r, nil)
	if err != nil {
		return // Accept has answered
	}
	c.SetReadLimit(b.gw.MaxBodyBytes())
	s := newSocket(b, c, cw.conn, r)
	s.run()
}
