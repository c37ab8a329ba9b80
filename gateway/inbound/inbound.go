// Package inbound owns a client's request body on its way in: read into
// memory bounded by its length limit (gateway.Options.MaxBodyBytes, 32 MiB), and held
// against the bound on body bytes in flight across every request
// (GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT). It never parses a body (package
// usage does) and never answers a client: the gateway turns its errors into
// 413, 503 OVERLOADED or 408.
//
// Bodies are not pooled: the outbound Transport may still read a request
// body after RoundTrip has returned, and it sends headers and body in one
// write only for a body it knows to be in memory (a plain *bytes.Reader),
// which leaves no hook to learn when it is done. A body sized to its
// Content-Length is also all a queued request holds.
package inbound

import (
	"errors"
	"io"
	"sync/atomic"
)

// MinBuf is the first buffer for a body of unknown length; MaxBuf
// bounds the first buffer for a declared length, so that a client cannot
// make the gateway reserve memory for bytes it never sends.
const (
	MinBuf = 512
	MaxBuf = 1 << 20
)

var (
	// ErrTooLarge: the body is longer than the limit.
	ErrTooLarge = errors.New("gateway: request body too large")
	// ErrBudget: the body would pass the bound on body bytes in flight.
	ErrBudget = errors.New("gateway: request body bytes in flight at their bound")
)

// Body is a client request body read into memory, and the bytes it holds
// in the gateway's BodyBytes.
type Body struct {
	Raw  []byte
	Held int64 // bytes reserved in the gateway's BodyBytes
}

// hold grows b's reservation in budget to n bytes, reporting false when
// the budget has no room for them.
func (b *Body) hold(budget *BodyBytes, n int64) bool {
	if n <= b.Held {
		return true
	}
	if !budget.Take(n - b.Held) {
		return false
	}
	b.Held = n
	return true
}

// Release gives b's reservation back to budget.
func (b *Body) Release(budget *BodyBytes) {
	if b.Held > 0 {
		budget.Give(b.Held)
		b.Held = 0
	}
}

// Read reads r into b.Raw, at most limit bytes. With a known
// contentLength the buffer is sized to it (plus the byte that lets the
// final read see EOF without growing it), up to MaxBuf at first.
// Before a byte is read the body reserves its Content-Length in budget,
// and as its buffer grows the buffer's capacity: ErrBudget when there
// is no room (b.Held is then what it did reserve, for release).
func Read(r io.Reader, b *Body, contentLength, limit int64, budget *BodyBytes) error {
	if contentLength > limit {
		return ErrTooLarge
	}
	var buf []byte
	if contentLength >= 0 {
		if !b.hold(budget, contentLength+1) {
			return ErrBudget
		}
		buf = make([]byte, 0, min(contentLength+1, MaxBuf))
	} else {
		if !b.hold(budget, MinBuf) {
			return ErrBudget
		}
		buf = make([]byte, 0, MinBuf)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
			if !b.hold(budget, int64(cap(buf))) {
				b.Raw = buf
				return ErrBudget
			}
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			b.Raw = buf
			return ErrTooLarge
		}
		if err == io.EOF {
			b.Raw = buf
			return nil
		}
		if err != nil {
			b.Raw = buf
			return err
		}
	}
}

// BodyBytes bounds the request-body bytes the gateway holds in memory at
// once (GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT): a body reserves its bytes
// before they are read — its Content-Length when it has one, its buffer's
// growth as it arrives otherwise — and gives them back when its request
// ends. A body that does not fit is refused (503 OVERLOADED) rather than
// read. Safe for concurrent use.
type BodyBytes struct {
	limit int64
	used  atomic.Int64
}

// NewBodyBytes returns a bound of limit bytes.
func NewBodyBytes(limit int64) *BodyBytes { return &BodyBytes{limit: limit} }

// Take reserves n more bytes and reports whether it could: false, and
// nothing reserved, when they would pass the bound.
func (b *BodyBytes) Take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Give returns n bytes reserved with Take.
func (b *BodyBytes) Give(n int64) { b.used.Add(-n) }

// InUse is the bytes reserved now.
func (b *BodyBytes) InUse() int64 { return b.used.Load() }
