package admission

import "time"

// Permit holds one slot in every gate of an admitted request's path until
// Release. The controller never reuses a Permit, so a stale pointer can never
// release a slot that another request holds.
type Permit struct {
	c        *Controller
	gates    [maxPath]*gate
	n        int
	released bool  // guarded by c.mu
	measured bool  // start was read: the hold is measured (a sample of immediate admissions, every queued one)
	start    int64 // Controller.nanos at admission, if measured
	waited   time.Duration
	blocked  *gate // the full gate the request parked on; nil when admitted at once
}

// Release returns the permit's slots. It is idempotent and safe to call from
// several goroutines: only the first call frees anything. A nil Permit or one
// for an empty path does nothing.
func (p *Permit) Release() {
	if p == nil || p.n == 0 {
		return
	}
	c := p.c
	c.mu.Lock()
	if !p.released {
		p.released = true
		c.release(p.gates[:p.n], p.start, p.measured)
	}
	c.mu.Unlock()
}

// Waited is how long the request waited to be admitted (0 when admitted at once).
func (p *Permit) Waited() time.Duration {
	if p == nil {
		return 0
	}
	return p.waited
}

// BlockedBy is the key of the full gate the request queued behind before it
// was admitted, "" when it was admitted at once (traces name it).
func (p *Permit) BlockedBy() string {
	if p == nil || p.blocked == nil {
		return ""
	}
	return p.blocked.key
}
