package outbound

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// UnansweredError is an upstream connection that ended before any byte of
// an answer came back (FastTransport).
type UnansweredError struct {
	Err error
	// Sent: the whole request had been written, so the upstream may have
	// read and run it; it is not sent again unless it carries
	// Idempotency-Key.
	Sent bool
	// Stale: the connection was a reused pooled one; its failure tells of
	// the pool (an upstream restart, an idle close), not of the upstream's
	// health, and never counts toward its breaker.
	Stale bool
}

func (e *UnansweredError) Error() string {
	switch {
	case e.Stale && e.Sent:
		return "outbound: a reused upstream connection closed after the request was written, before any answer: " + e.Err.Error()
	case e.Stale:
		return "outbound: a reused upstream connection failed before the request was written: " + e.Err.Error()
	}
	return "outbound: the upstream closed the connection after the request was written, before any answer: " + e.Err.Error()
}

func (e *UnansweredError) Unwrap() error { return e.Err }

// unanswered reports whether err, reading an answer's first line, says the
// connection ended before any byte of it.
func unanswered(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// freshConn dials a connection of the request's own to hc's host, outside
// its pool (the one retry after a reused connection failed), with TLS when
// hc has it.
func freshConn(ctx context.Context, hc *fasthttp.HostClient, timeout time.Duration) (net.Conn, error) {
	c, err := hc.DialTimeout(hc.Addr, timeout)
	if err != nil || !hc.IsTLS {
		return c, err
	}
	cfg := &tls.Config{}
	if hc.TLSConfig != nil {
		cfg = hc.TLSConfig.Clone()
	}
	if cfg.ServerName == "" {
		host, _, herr := net.SplitHostPort(hc.Addr)
		if herr != nil {
			host = hc.Addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(c, cfg)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return tc, nil
}
