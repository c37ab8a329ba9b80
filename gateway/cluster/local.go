package cluster

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// Local adapts an in-process *admission.Controller to Controller's method
// set, so a gateway can hold either behind one interface. Its permits are
// the controller's own *admission.Permit (which escapes to the heap here,
// one small allocation per admission).
type Local struct {
	C *admission.Controller
}

// Acquire is admission.Controller.Acquire.
func (l Local) Acquire(ctx context.Context, req admission.Request) (Permit, error) {
	p, err := l.C.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// TryAcquire is admission.Controller.TryAcquire.
func (l Local) TryAcquire(req admission.Request) (Permit, bool) {
	p, ok := l.C.TryAcquire(req)
	if !ok {
		return nil, false
	}
	return p, true
}

// EstimateWait is admission.Controller.EstimateWait.
func (l Local) EstimateWait(req admission.Request) time.Duration { return l.C.EstimateWait(req) }

// SetCaps is admission.Controller.SetCaps.
func (l Local) SetCaps(caps map[string]int) { l.C.SetCaps(caps) }

// Stats is admission.Controller.Stats.
func (l Local) Stats() []admission.GateStats { return l.C.Stats() }
