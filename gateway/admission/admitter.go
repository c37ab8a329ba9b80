package admission

import (
	"context"
	"errors"
	"time"
)

// Grant is an admitted request's hold on the gates of its path: a *Permit
// from a Controller, or a lease from a shared controller (gateway/cluster).
// Release is idempotent and safe from several goroutines; Waited is how long
// the request waited to be admitted.
type Grant interface {
	Release()
	Waited() time.Duration
}

// ClusterInFlight is implemented by the grants of a shared controller
// (gateway/cluster): the number of requests holding a capped gate of the
// grant's path across every replica, this one included, right after it was
// admitted (false for a gate not on the path, an uncapped gate, or a grant
// admitted while the shared store was away). The adaptive learner uses it to
// tell whether a request found the gate full: this replica's own in-flight
// count rarely reaches a cap shared by several.
type ClusterInFlight interface {
	InFlightAt(gateKey string) (int, bool)
}

// SoonReleaser is implemented by grants whose Release waits for a round
// trip to a shared store (gateway/cluster's leases): ReleaseSoon gives the
// slots back without waiting for it. The gateway uses it once an attempt is
// over, so the client's next request on the connection does not wait for
// the round trip either.
type SoonReleaser interface {
	ReleaseSoon()
}

// Admitter is the admission controller the gateway drives: a Controller
// through Local, or gateway/cluster's *Controller, whose caps hold across
// replicas. Rejections are *Error (timeout, full queue), an error matching
// ErrUnavailable (a shared controller that cannot reach its store and runs
// fail-closed), or the context's error.
type Admitter interface {
	Acquire(ctx context.Context, req Request) (Grant, error)
	TryAcquire(req Request) (Grant, bool)
	EstimateWait(req Request) time.Duration
	SetCaps(caps map[string]int)
	Stats() []GateStats
	// Drain ends every wait with an *Error of CodeShuttingDown and refuses
	// every later request the same way (the process is shutting down).
	Drain()
}

// CodeUnavailable is the `code` the gateway sends with 503 when a shared
// controller runs fail-closed and cannot reach its store.
const CodeUnavailable = "CLUSTER_UNAVAILABLE"

// ErrUnavailable is matched (errors.Is) by a shared controller's rejection
// while its store cannot be reached and it runs fail-closed.
var ErrUnavailable = errors.New("admission: " + CodeUnavailable)

// Local adapts a Controller to Admitter. It is a single pointer, so storing
// it in an Admitter allocates nothing, and a *Permit is already on the heap,
// so returning it as a Grant does not either.
type Local struct {
	C *Controller
}

var _ Admitter = Local{}

// Acquire is Controller.Acquire.
func (l Local) Acquire(ctx context.Context, req Request) (Grant, error) {
	p, err := l.C.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// TryAcquire is Controller.TryAcquire.
func (l Local) TryAcquire(req Request) (Grant, bool) {
	p, ok := l.C.TryAcquire(req)
	if !ok {
		return nil, false
	}
	return p, true
}

// EstimateWait is Controller.EstimateWait.
func (l Local) EstimateWait(req Request) time.Duration { return l.C.EstimateWait(req) }

// SetCaps is Controller.SetCaps.
func (l Local) SetCaps(caps map[string]int) { l.C.SetCaps(caps) }

// Drain is Controller.Drain.
func (l Local) Drain() { l.C.Drain() }

// Stats is Controller.Stats.
func (l Local) Stats() []GateStats { return l.C.Stats() }

// SetPriorityAging is Controller.SetPriorityAging.
func (l Local) SetPriorityAging(d time.Duration) { l.C.SetPriorityAging(d) }
