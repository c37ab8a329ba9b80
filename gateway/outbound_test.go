package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// The tests in this file check what the outbound leg must do on either
// client (-outbound): reuse connections, survive an upstream closing idle
// ones, speak TLS, close the upstream request when the client goes, forward
// the body byte for byte and drop hop-by-hop headers both ways.

// outboundEnv is an env whose fake upstream runs behind wrap on a server
// the test can watch (conns counts the connections it accepted), over TLS
// when tlsOn.
type outboundEnv struct {
	*env
	upSrv *httptest.Server
	conns atomic.Int64
}

func newOutboundEnv(t *testing.T, tlsOn bool, wrap func(http.Handler) http.Handler) *outboundEnv {
	t.Helper()
	up := upstreamtest.NewServer(upstreamtest.Options{Chunks: 4})
	var h http.Handler = up
	if wrap != nil {
		h = wrap(up)
	}
	oe := &outboundEnv{}
	upSrv := httptest.NewUnstartedServer(h)
	upSrv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			oe.conns.Add(1)
		}
	}
	o := Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}}
	var own interface{ CloseIdleConnections() }
	if tlsOn {
		upSrv.StartTLS()
		pool := x509.NewCertPool()
		pool.AddCert(upSrv.Certificate())
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if *testOutbound == OutboundFastHTTP {
			ft := outbound.NewFastTransport()
			ft.TLSConfig = cfg
			o.Transport, own = ft, ft
		} else {
			nt := outbound.NewTransport()
			nt.TLSClientConfig = cfg
			o.Transport, own = nt, nt
		}
	} else {
		upSrv.Start()
	}
	gw := New(o)
	gwSrv := httptest.NewServer(gw)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	oe.env = &env{t: t, up: up, upURL: upSrv.URL, gw: gw, gwURL: gwSrv.URL, client: &http.Client{Transport: tr}}
	oe.upSrv = upSrv
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = up.Close()
		gwSrv.Close()
		gw.Close()
		if own != nil {
			own.CloseIdleConnections()
		}
		upSrv.Close()
	})
	c := oe.conn("c1", "k1", "glm-5")
	gw.Apply(Config{Connections: []Connection{c}})
	return oe
}

func TestOutboundReusesConnections(t *testing.T) {
	t.Parallel()
	for _, tlsOn := range []bool{false, true} {
		name := "http"
		if tlsOn {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newOutboundEnv(t, tlsOn, nil)
			for i := range 5 {
				if r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", i%2 == 1)); r.status != http.StatusOK {
					t.Fatalf("request %d: status %d, body %s", i, r.status, r.body)
				}
			}
			if n := e.conns.Load(); n != 1 {
				t.Errorf("upstream accepted %d connections for 5 sequential requests, want 1", n)
			}
		})
	}
}

// TestOutboundClientGoneBeforeHeaders: a client that hangs up while the
// upstream has not answered yet ends the upstream request.
func TestOutboundClientGoneBeforeHeaders(t *testing.T) {
	t.Parallel()
	e := newOutboundEnv(t, false, nil)
	hold := make(chan struct{})
	defer close(hold)
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.gwURL+"/v1/chat/completions", strings.NewReader(chatBody("glm-5", false)))
		req.Header.Set("Authorization", "Bearer "+testClientKey)
		if resp, err := e.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if err := e.up.WaitInFlight(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if err := e.up.WaitInFlight(testCtx(t), 0); err != nil {
		t.Errorf("upstream request not ended after the client left: %v", err)
	}
	waitFor(t, 5*time.Second, "gates idle", e.allGatesIdle)
}

// TestOutboundBodyAndHopByHop: the request body reaches the upstream byte for
// byte (a large one too), and hop-by-hop headers go neither way.
func TestOutboundBodyAndHopByHop(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var gotSum [sha256.Size]byte
	var gotHeader http.Header
	var gotLen int64
	e := newOutboundEnv(t, false, func(up http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			gotSum, gotHeader, gotLen = sha256.Sum256(b), r.Header.Clone(), r.ContentLength
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
			w.Header().Set("Connection", "X-Up-Hop")
			w.Header().Set("X-Up-Hop", "1")
			w.Header().Set("Keep-Alive", "timeout=5")
			up.ServeHTTP(w, r)
		})
	})
	// Odd spacing and key order: a re-encoded body would differ.
	big := `{ "messages" : [{"role":"user","content":"` + strings.Repeat("ab\u00e9 ", 50000) + `"}],  "model":"glm-5" }`
	for _, body := range []string{`{"model":"glm-5",  "messages":[{"role":"user","content":"hi"}] }`, big} {
		r := e.post(testCtx(t), "/v1/chat/completions", body,
			"Connection", "X-Client-Hop", "X-Client-Hop", "1", "Te", "trailers", "Upgrade", "h2c")
		if r.status != http.StatusOK {
			t.Fatalf("status %d, body %s", r.status, r.body)
		}
		mu.Lock()
		sum, h, n := gotSum, gotHeader, gotLen
		mu.Unlock()
		if sum != sha256.Sum256([]byte(body)) || n != int64(len(body)) {
			t.Errorf("upstream got a different body (%d bytes, Content-Length %d), want the client's %d bytes as they are", n, n, len(body))
		}
		for _, k := range []string{"X-Client-Hop", "Te", "Upgrade"} {
			if v, ok := h[k]; ok {
				t.Errorf("upstream got %s: %q, want it dropped", k, v)
			}
		}
		if got := h.Get("Authorization"); got != "Bearer k1" {
			t.Errorf("upstream Authorization %q, want the connection's key", got)
		}
		if got := h.Get("Content-Type"); got != "application/json" {
			t.Errorf("upstream Content-Type %q, want the client's application/json", got)
		}
		for _, k := range []string{"X-Up-Hop", "Keep-Alive"} {
			if v := r.header.Get(k); v != "" {
				t.Errorf("client got %s: %q, want it dropped", k, v)
			}
		}
		if r.header.Get(HeaderConnection) != "conn-c1" {
			t.Errorf("client got %s %q, want conn-c1", HeaderConnection, r.header.Get(HeaderConnection))
		}
	}
}

// TestOutboundLargeResponseHeaders: an answer whose header block is 6 KiB (a
// provider's rate-limit and tracing headers, well above what they send) is
// relayed on either client: fasthttp's read buffer, which bounds the header
// block, is sized above it (fastReadBuf).
func TestOutboundLargeResponseHeaders(t *testing.T) {
	t.Parallel()
	const total = 6 << 10
	e := newOutboundEnv(t, false, func(up http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < total/100; i++ {
				w.Header().Set("X-Upstream-Trace-"+strings.Repeat("t", 10)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("v", 80))
			}
			up.ServeHTTP(w, r)
		})
	})
	r := e.post(testCtx(t), "/v1/chat/completions", `{"model":"glm-5","messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %s; want 200 with a %d-byte header block upstream", r.status, r.body, total)
	}
	if !strings.Contains(string(r.body), "choices") {
		t.Errorf("body %s, want the upstream's completion", r.body)
	}
}
