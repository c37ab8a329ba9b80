package gateway

import (
	"errors"
	"io"
)

// copyBufSize is the buffer the response body is copied through, one per
// answer being relayed (pooled). A read returns what has arrived, and an SSE
// event or a chat answer is well under it; the pool of them is live heap,
// which GOGC=400 multiplies in RSS, so it is not larger.
const copyBufSize = 16 << 10

// maxErrorBody bounds how much of an upstream error response is kept to
// decide on failover and, if no other connection succeeds, to send back.
const maxErrorBody = 1 << 20

// minBodyBuf is the first buffer for a body of unknown length; maxBodyBuf
// bounds the first buffer for a declared length, so that a client cannot
// make the gateway reserve memory for bytes it never sends.
const (
	minBodyBuf = 512
	maxBodyBuf = 1 << 20
)

var errBodyTooLarge = errors.New("gateway: request body too large")

// reqBody is a client request body and, if the model was rewritten, the
// rewritten copy.
//
// Bodies are not pooled: the outbound Transport may still read a request
// body after RoundTrip has returned, and it sends headers and body in one
// write only for a body it knows to be in memory (a plain *bytes.Reader),
// which leaves no hook to learn when it is done. A body sized to its
// Content-Length is also all a queued request holds.
type reqBody struct {
	raw      []byte
	alt      []byte // raw rewritten for altM (and altUsage)
	altM     string
	altUsage bool // alt asks for stream usage
}

// readBody reads r into b.raw, at most limit bytes. With a known
// contentLength the buffer is sized to it (plus the byte that lets the
// final read see EOF without growing it), up to maxBodyBuf at first.
func readBody(r io.Reader, b *reqBody, contentLength, limit int64) error {
	if contentLength > limit {
		return errBodyTooLarge
	}
	var buf []byte
	if contentLength >= 0 {
		buf = make([]byte, 0, min(contentLength+1, maxBodyBuf))
	} else {
		buf = make([]byte, 0, minBodyBuf)
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
