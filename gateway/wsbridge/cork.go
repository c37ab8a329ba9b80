package wsbridge

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"sync"
)

// corkWriter is the http.ResponseWriter the upgrade is accepted on: its
// Hijack hands the WebSocket library a connection whose writes can be held
// back (corked) and sent in one write, so that the events of one upstream
// read go out in one system call, as the HTTP relay sends them, instead of
// one per message (the library flushes every message).
type corkWriter struct {
	http.ResponseWriter
	conn *corkConn
}

func (w *corkWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("wsbridge: the connection cannot be taken over")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	if err := brw.Writer.Flush(); err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	w.conn = &corkConn{Conn: c}
	return w.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.conn, 4096)), nil
}

// corkConn is a net.Conn whose writes wait in buf while corked.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// cork holds writes back until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork sends what was held back in one write; false when that failed.
func (c *corkConn) uncork() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return true
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > 64<<10 {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err == nil
}
