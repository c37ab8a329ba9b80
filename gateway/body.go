package gateway

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
)

// copyBufSize is the buffer the response body is copied through.
const copyBufSize = 32 << 10

// maxPooledBody keeps unusually large request buffers out of the pool.
const maxPooledBody = 1 << 20

// maxErrorBody bounds how much of an upstream error response is kept to
// decide on failover and, if no other connection succeeds, to send back.
const maxErrorBody = 1 << 20

var errBodyTooLarge = errors.New("gateway: request body too large")

// reqBody holds a client request body (and, if the model was rewritten,
// the rewritten copy) in pooled memory. The outbound Transport may read and
// close a request body after RoundTrip has returned, so the buffer goes back
// to the pool only when the handler and every body reader are done with it.
type reqBody struct {
	raw      []byte
	alt      []byte // raw rewritten for altM (and altUsage)
	altM     string
	altUsage bool // alt asks for stream usage
	refs     atomic.Int32
	put      func(*reqBody)
}

func (b *reqBody) hold() { b.refs.Add(1) }

func (b *reqBody) drop() {
	if b.refs.Add(-1) == 0 {
		b.put(b)
	}
}

// bodyReader is one outbound request body over a reqBody.
type bodyReader struct {
	bytes.Reader
	owner  *reqBody
	closed atomic.Bool
}

func newBodyReader(owner *reqBody, p []byte) *bodyReader {
	owner.hold()
	r := &bodyReader{owner: owner}
	r.Reset(p)
	return r
}

// Close releases the reader's hold on the pooled buffer.
func (r *bodyReader) Close() error {
	if r.closed.CompareAndSwap(false, true) {
		r.owner.drop()
	}
	return nil
}

func (g *Gateway) getBody() *reqBody {
	if b, ok := g.bodies.Get().(*reqBody); ok {
		b.refs.Store(1)
		return b
	}
	b := &reqBody{put: g.putBody}
	b.refs.Store(1)
	return b
}

func (g *Gateway) putBody(b *reqBody) {
	if cap(b.raw) > maxPooledBody || cap(b.alt) > maxPooledBody {
		return
	}
	b.raw, b.alt, b.altM, b.altUsage = b.raw[:0], b.alt[:0], "", false
	g.bodies.Put(b)
}

// readBody reads r into b.raw, at most limit bytes.
func readBody(r io.Reader, b *reqBody, contentLength, limit int64) error {
	if contentLength > limit {
		return errBodyTooLarge
	}
	buf := b.raw[:0]
	if contentLength > 0 && int64(cap(buf)) < contentLength+1 {
		buf = make([]byte, 0, contentLength+1)
	} else if cap(buf) < 512 {
		buf = make([]byte, 0, 4096)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			b.raw = buf
			return errBodyTooLarge
		}
		if err == io.EOF {
			b.raw = buf
			return nil
		}
		if err != nil {
			b.raw = buf
			return err
		}
	}
}

func (g *Gateway) getCopyBuf() *[]byte {
	if p, ok := g.copyBuf.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, copyBufSize)
	return &b
}
