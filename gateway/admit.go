package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// permit is an admitted request's hold on its gates: *admission.Permit, or a
// cluster lease. Release is idempotent. The type is the same unnamed
// interface as gateway/cluster's Permit alias, so that package's Controller
// satisfies admitter without gateway importing it.
type permit = interface {
	Release()
	Waited() time.Duration
}

// admitter is the admission controller the gateway drives: the in-process
// *admission.Controller (through localAdmitter) or a shared one such as
// gateway/cluster's Controller. Rejections are *admission.Error; an error
// with a method Code() string returning CodeClusterUnavailable means the
// shared store is unreachable and the controller runs fail-closed.
type admitter interface {
	Acquire(ctx context.Context, req admission.Request) (permit, error)
	TryAcquire(req admission.Request) (permit, bool)
	EstimateWait(req admission.Request) time.Duration
	SetCaps(caps map[string]int)
	Stats() []admission.GateStats
}

// localAdmitter adapts *admission.Controller to admitter. It is a single
// pointer, so storing it in the interface allocates nothing, and the
// controller's permit is already on the heap, so neither does returning it
// as a permit.
type localAdmitter struct{ c *admission.Controller }

func (l localAdmitter) Acquire(ctx context.Context, req admission.Request) (permit, error) {
	p, err := l.c.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (l localAdmitter) TryAcquire(req admission.Request) (permit, bool) {
	p, ok := l.c.TryAcquire(req)
	if !ok {
		return nil, false
	}
	return p, true
}

func (l localAdmitter) EstimateWait(req admission.Request) time.Duration {
	return l.c.EstimateWait(req)
}

func (l localAdmitter) SetCaps(caps map[string]int) { l.c.SetCaps(caps) }

func (l localAdmitter) Stats() []admission.GateStats { return l.c.Stats() }

// errClusterUnavailable is the 503 sent while a shared admission store
// is unreachable and the controller runs fail-closed.
var errClusterUnavailable = &apiError{status: http.StatusServiceUnavailable, code: CodeClusterUnavailable,
	message: "the shared admission store is unreachable; try again shortly", retryAfter: 1}

// clusterUnavailable reports whether err says the shared admission store is
// unreachable: some error in its chain has a Code() string method returning
// CodeClusterUnavailable (gateway/cluster's *UnavailableError does).
func clusterUnavailable(err error) bool {
	var coded interface{ Code() string }
	return errors.As(err, &coded) && coded.Code() == CodeClusterUnavailable
}
