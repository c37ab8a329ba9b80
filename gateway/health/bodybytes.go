package health

import "sync/atomic"

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
