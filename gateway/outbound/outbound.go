package outbound

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// The names of the upstream clients (gateway.Options.Outbound,
// GATEHOUSE_OUTBOUND).
const (
	// NetHTTP is net/http's Transport (NewTransport).
	NetHTTP = "net/http"
	// FastHTTP is fasthttp's HostClient, doing its I/O on the
	// handler's goroutine (NewFastTransport): the default, less CPU per
	// request than net/http's in both plain and streaming answers
	// (package doc, "Why fasthttp is the default").
	FastHTTP = "fasthttp"
)

// Valid reports whether name is the name of an upstream client.
func Valid(name string) bool {
	return name == NetHTTP || name == FastHTTP
}

// Client is an upstream client New made: it sends requests and can close
// its idle connections.
type Client interface {
	http.RoundTripper
	CloseIdleConnections()
}

// New returns the upstream client name (NetHTTP; anything else is the
// default, FastHTTP) dialing through d.
func New(name string, d *Dialer) Client {
	if name == NetHTTP {
		t := NewTransport()
		t.DialContext = d.DialContext
		return t
	}
	t := NewFastTransport()
	t.Dialer = d
	return t
}

// NewTransport returns the net/http upstream client: a connection pool
// sized for a proxy (256 idle connections per upstream host, where Go's
// default of 2 would redial under load), no transparent compression (bodies
// pass through as the upstream encoded them), no proxy from the
// environment, and bounded dial and TLS handshakes. Response time is
// bounded per request by the execution bound instead of a transport timeout.
//
// Its read and write buffers are net/http's 4 KiB defaults: a pooled
// connection holds both for as long as it is idle, and the relay reads the
// body into its own 16 KiB buffer, which bufio passes straight through. With
// 32 KiB each, 64 idle connections held 4 MiB, which GOGC=400 turns into
// about 20 MB more RSS.
func NewTransport() *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// headers recycles the header maps of requests sent with FastTransport,
// which is done with them when Do returns (net/http's Transport may still
// be writing the request then: its requests get fresh maps).
var headers = sync.Pool{New: func() any { return make(http.Header, 8) }}

// maxPooledHeader bounds the header maps kept: a client sending many
// headers must not leave a big map in the pool for every request.
const maxPooledHeader = 32

// GetHeader returns an empty header map for a request to send with
// FastTransport; give it back with PutHeader once Do has returned.
func GetHeader() http.Header { return headers.Get().(http.Header) }

// PutHeader gives back a map from GetHeader.
func PutHeader(h http.Header) {
	if len(h) > maxPooledHeader {
		return
	}
	clear(h)
	headers.Put(h)
}
