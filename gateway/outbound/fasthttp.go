package outbound

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// FastTransport is an http.RoundTripper on fasthttp's HostClient (one per
// upstream scheme and host) with response body streaming. Unlike
// net/http's Transport, which hands every request to a write-loop and a
// read-loop goroutine per connection, it writes the request and reads the
// response on the calling goroutine: fewer goroutine hand-offs and
// syscalls per request (docs/BENCHMARKS.md).
//
// What the gateway relies on, and how it holds here:
//   - the request context bounds the whole exchange (execution bound,
//     client hang-up): when it ends, the connection is closed at once,
//     which the upstream sees, and a blocked read or write returns;
//   - the request body is streamed from Request.Body as it is (with
//     Content-Length), headers and a small body in one write;
//   - response bodies stream: Read returns what has arrived;
//   - idle connections are reused (per host, most recently used first);
//     before a request is written on one, a non-blocking peek at its socket
//     (idleConnAlive) drops it if the upstream closed it or wrote to it
//     while idle, as net/http's background read does. A reused connection
//     that still fails before any answer byte is retried once, on a freshly
//     dialled connection, only when the request was not written whole or
//     carries Idempotency-Key: a request the upstream may have read is never
//     sent twice (UnansweredError);
//   - https base URLs use TLS (HTTP/1.1; net/http negotiates HTTP/2).
//
// Dialing is bounded by 10 s (and the context's deadline), not by the
// context's cancellation.
type FastTransport struct {
	// TLSConfig, when set, is the TLS configuration for https upstreams
	// (tests trust their own CA with it).
	TLSConfig *tls.Config
	// Dialer connects to upstream hosts, refusing denied addresses; nil
	// dials without a deny list. Set before the first request.
	Dialer *Dialer

	mu    sync.Mutex // serialises adding hosts
	hosts atomic.Pointer[map[fastHostKey]*fasthttp.HostClient]
}

type fastHostKey struct {
	tls  bool
	host string
}

// NewFastTransport returns the fasthttp outbound client, sized like
// NewTransport: no limit on connections per host (the gates bound them),
// small buffers (fastReadBuf, fastWriteBuf), no transparent compression,
// no proxy.
func NewFastTransport() *FastTransport { return &FastTransport{} }

// fastReadBuf and fastWriteBuf size a connection's buffers, which a pooled
// connection holds while idle (GOGC multiplies them in RSS, as with
// NewTransport's). The read buffer also bounds an answer's header block:
// 8 KiB, as common proxies allow, above what providers send (2–4 KiB with
// their rate-limit headers). Bodies stream through the relay's own buffer.
const (
	fastReadBuf  = 8 << 10
	fastWriteBuf = 4 << 10
)

// fastIdle is how long an idle upstream connection is kept. It is shorter
// than net/http's 90 s because fasthttp has no background read to notice
// an upstream closing an idle connection.
const fastIdle = 30 * time.Second

func (t *FastTransport) host(tlsOn bool, host string) *fasthttp.HostClient {
	k := fastHostKey{tls: tlsOn, host: host}
	if m := t.hosts.Load(); m != nil {
		if hc := (*m)[k]; hc != nil {
			return hc
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.hosts.Load()
	if old != nil {
		if hc := (*old)[k]; hc != nil {
			return hc
		}
	}
	hc := &fasthttp.HostClient{
		Addr:                     fasthttp.AddMissingPort(host, tlsOn),
		IsTLS:                    tlsOn,
		TLSConfig:                t.TLSConfig,
		Transport:                fastConnTransport{},
		DialTimeout:              t.Dialer.dialTimeoutFunc,
		MaxConns:                 1 << 20,
		MaxIdleConnDuration:      fastIdle,
		ConnPoolStrategy:         fasthttp.LIFO,
		ReadBufferSize:           fastReadBuf,
		WriteBufferSize:          fastWriteBuf,
		StreamResponseBody:       true,
		DisablePathNormalizing:   true,
		NoDefaultUserAgentHeader: true,
	}
	m := make(map[fastHostKey]*fasthttp.HostClient, 1)
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	m[k] = hc
	t.hosts.Store(&m)
	return hc
}

// CloseIdleConnections closes every idle upstream connection.
func (t *FastTransport) CloseIdleConnections() {
	if m := t.hosts.Load(); m != nil {
		for _, hc := range *m {
			hc.CloseIdleConnections()
		}
	}
}

// fastCall is one request on its way: what fastConnTransport, which runs
// inside HostClient.Do, hands back to RoundTrip and the body. The
// http.Response RoundTrip returns lives in it (one allocation for both),
// and the connection's state is kept in fields rather than closures, for
// the same reason.
type fastCall struct {
	out  http.Response
	ctx  context.Context
	req  *fasthttp.Request
	resp *fasthttp.Response
	// hc is the host client the connection belongs to; release gives the
	// connection back to it (true) or closes it (a closure: fasthttp's
	// connection type is unexported); br is its read buffer.
	hc      *fasthttp.HostClient
	release func(keep bool)
	br      *bufio.Reader
	// stop ends the context's watch on the connection (context.AfterFunc).
	stop func() bool
	// closeAfter: the request asked for the connection to be closed.
	closeAfter bool
	// chunked: the body comes in chunked transfer encoding.
	chunked bool
	// stale: the attempt failed on a reused connection before any byte of
	// an answer arrived; sent: it failed after the whole request was
	// written, before any byte of an answer; fresh: the attempt must dial a
	// connection of its own (the retry).
	stale, sent, fresh bool
	eof                bool
}

// endConn gives the connection back (keep) or closes it.
func (c *fastCall) endConn(keep bool) {
	// stop reports false once the context has fired: the connection is
	// (being) closed and must not go back to the pool.
	c.release(c.stop() && keep)
}

// end releases the read buffer and gives the connection back (keep, unless
// the request asked to close it) or closes it; once the response headers
// are read.
func (c *fastCall) end(keep bool) {
	c.hc.ReleaseReader(c.br)
	c.endConn(keep && !c.closeAfter)
}

// fastCallKey is the request user value that carries the *fastCall.
var fastCallKey = &struct{ name string }{"outbound.fastCall"}

// RoundTrip sends r and returns the response headers, with a body that
// streams from the connection and gives it back when closed.
func (t *FastTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.Do(r.Context(), r)
	if resp != nil {
		resp.Request = r
	}
	return resp, err
}

// Do is RoundTrip with the request's context given apart, and a response
// without its Request: the gateway's attempts call it so that r can stay on
// their stack (no http.Request.WithContext copy). r is not kept once it
// returns.
func (t *FastTransport) Do(ctx context.Context, r *http.Request) (*http.Response, error) {
	if err := ctx.Err(); err != nil {
		closeBody(r)
		return nil, err
	}
	u := r.URL
	hc := t.host(u.Scheme == "https", u.Host)
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	call := &fastCall{ctx: ctx, req: req, resp: resp}
	req.SetUserValue(fastCallKey, call)
	req.Header.SetNoDefaultContentType(true)
	resp.Header.SetNoDefaultContentType(true)
	req.Header.SetMethod(r.Method)
	req.SetRequestURI(u.RequestURI())
	host := r.Host
	if host == "" {
		host = u.Host
	}
	req.Header.SetHost(host)
	req.URI().SetScheme(u.Scheme)
	for k, vv := range r.Header {
		for _, v := range vv {
			req.Header.Add(k, v)
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		req.SetTimeout(time.Until(dl)) // bounds the dial
	}
	body := r.Body
	raw, _ := body.(*RawBody)
	for try := 0; ; try++ {
		switch {
		case raw != nil:
			req.SetBodyRaw(raw.b)
		case body != nil && body != http.NoBody:
			req.SetBodyStream(body, int(r.ContentLength))
		}
		call.stale, call.sent = false, false
		err := hc.Do(req, resp)
		if err == nil {
			break
		}
		// A reused connection that failed before any byte of an answer goes
		// again once, on a fresh connection: when the request was not
		// written whole, or when it was but the client made it safe to
		// repeat (Idempotency-Key). Otherwise the upstream may have run it:
		// never send it twice.
		again := call.stale && try == 0 && ctx.Err() == nil &&
			(!call.sent || r.Header.Get("Idempotency-Key") != "") &&
			(body == nil || raw != nil || r.GetBody != nil)
		if again {
			call.fresh = true
			if raw == nil && r.GetBody != nil {
				var gerr error
				if body, gerr = r.GetBody(); gerr == nil {
					continue
				}
			} else {
				continue
			}
		}
		if call.stale || call.sent {
			err = &UnansweredError{Err: err, Sent: call.sent, Stale: call.stale}
		}
		fasthttp.ReleaseRequest(req)
		fasthttp.ReleaseResponse(resp)
		return nil, err
	}
	fasthttp.ReleaseRequest(req)
	call.req = nil
	call.chunked = resp.Header.ContentLength() == -1
	out := &call.out
	*out = http.Response{
		StatusCode:    resp.StatusCode(),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        fastResponseHeader(&resp.Header),
		ContentLength: int64(resp.Header.ContentLength()),
		Body:          fastBody{call},
	}
	if out.ContentLength < 0 {
		out.ContentLength = -1
	}
	return out, nil
}

// RawBody is a request body in memory that FastTransport sends as it is
// (fasthttp's SetBodyRaw: no copy through a stream) and can send again on
// a retry without GetBody. The gateway's attempts use it; any other
// RoundTripper would see a plain reader.
type RawBody struct {
	b   []byte
	off int
}

// Reset makes b the body p, read from its start: one RawBody can serve
// every attempt of a request without allocating.
func (b *RawBody) Reset(p []byte) { *b = RawBody{b: p} }

func (b *RawBody) Read(p []byte) (int, error) {
	if b.off >= len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}

// Close does nothing: the bytes belong to the exchange.
func (*RawBody) Close() error { return nil }

func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}

// fastConnTransport is the HostClient's transport: fasthttp's own sequence
// (take a pooled connection, write the request, read the response headers
// and leave the body streaming), with the request's context watching the
// connection from the moment it is taken, so that a cancelled or expired
// request closes it whatever it is blocked on.
type fastConnTransport struct{}

func (fastConnTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	call, _ := req.UserValue(fastCallKey).(*fastCall)
	if call == nil {
		return false, errors.New("outbound: fasthttp request without its call")
	}
	var conn net.Conn
	reused := false
	call.hc = hc
	if call.fresh {
		// A retry: on a connection of its own, never another pooled one
		// (after an upstream restart every pooled connection may be dead).
		c, err := freshConn(call.ctx, hc, req.GetTimeOut())
		if err != nil {
			return false, err
		}
		conn = c
		call.release = func(bool) { _ = c.Close() }
	} else {
		for {
			cc, err := hc.AcquireConn(req.GetTimeOut(), false)
			if err != nil {
				return false, err
			}
			reused = !cc.LastUseTime().IsZero()
			// Never write on a pooled connection the upstream has closed
			// (or written to unasked): take the next one, or dial.
			if reused && !idleConnAlive(cc.Conn()) {
				hc.CloseConn(cc)
				continue
			}
			conn = cc.Conn()
			call.release = func(keep bool) {
				if keep {
					hc.ReleaseConn(cc)
				} else {
					hc.CloseConn(cc)
				}
			}
			break
		}
	}
	call.stop = context.AfterFunc(call.ctx, func() { _ = conn.Close() })
	bw := hc.AcquireWriter(conn)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		call.endConn(false)
		call.stale = reused
		return false, err
	}
	br := hc.AcquireReader(conn)
	if err := resp.ReadLimitBody(br, 0); err != nil {
		hc.ReleaseReader(br)
		call.endConn(false)
		if unanswered(err) {
			call.sent = true
			call.stale = reused
		}
		return false, err
	}
	call.closeAfter = req.ConnectionClose()
	call.br = br
	return false, nil
}
