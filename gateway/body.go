package gateway

import (
	"errors"
	"io"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gateway/health"
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

// errUpstreamDenied is the 502 of a connection whose host resolved to an
// address of GATEHOUSE_UPSTREAM_DENY when the gateway dialled it.
var errUpstreamDenied = &apiError{Status: http.StatusBadGateway, Code: CodeUpstreamError,
	Message: "the upstream's address is on the gateway's deny list (GATEHOUSE_UPSTREAM_DENY)"}

// errOverloaded answers a body beyond the bound on body bytes in flight.
var errOverloaded = &apiError{Status: http.StatusServiceUnavailable, Code: CodeOverloaded,
	Message: "the gateway holds as many request bodies as it may; retry shortly", RetryAfter: 1}

var (
	errBodyTooLarge = errors.New("gateway: request body too large")
	// errBodyBudget: the body would pass the bound on body bytes in flight.
	errBodyBudget = errors.New("gateway: request body bytes in flight at their bound")
)

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
	altUsage bool  // alt asks for stream usage
	held     int64 // bytes reserved in the gateway's BodyBytes
}

// hold grows b's reservation in budget to n bytes, reporting false when
// the budget has no room for them.
func (b *reqBody) hold(budget *health.BodyBytes, n int64) bool {
	if n <= b.held {
		return true
	}
	if !budget.Take(n - b.held) {
		return false
	}
	b.held = n
	return true
}

// release gives b's reservation back to budget.
func (b *reqBody) release(budget *health.BodyBytes) {
	if b.held > 0 {
		budget.Give(b.held)
		b.held = 0
	}
}

// readBody reads r into b.raw, at most limit bytes. With a known
// contentLength the buffer is sized to it (plus the byte that lets the
// final read see EOF without growing it), up to maxBodyBuf at first.
// Before a byte is read the body reserves its Content-Length in budget,
// and as its buffer grows the buffer's capacity: errBodyBudget when there
// is no room (b.held is then what it did reserve, for release).
func readBody(r io.Reader, b *reqBody, contentLength, limit int64, budget *health.BodyBytes) error {
	if contentLength > limit {
		return errBodyTooLarge
	}
	var buf []byte
	if contentLength >= 0 {
		if !b.hold(budget, contentLength+1) {
			return errBodyBudget
		}
		buf = make([]byte, 0, min(contentLength+1, maxBodyBuf))
	} else {
		if !b.hold(budget, minBodyBuf) {
			return errBodyBudget
		}
		buf = make([]byte, 0, minBodyBuf)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
			if !b.hold(budget, int64(cap(buf))) {
				b.raw = buf
				return errBodyBudget
			}
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
