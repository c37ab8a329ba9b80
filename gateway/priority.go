package gateway

import (
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
)

// Priority classes (DESIGN.md, "Priority classes and client signals"): a
// client key has a class (limits "priority", default standard); a request
// may lower its own with X-Gatehouse-Priority, never raise it. Admission
// serves a higher class first at every saturated gate, ageing waiters up
// one class per priorityAgingMs (docs/ADMISSION.md, "Priority classes").

// HeaderPriority is the request header that lowers a request's class.
const HeaderPriority = clientkey.HeaderPriority

// checkPriority sets x.priority from the key's class and the request's
// X-Gatehouse-Priority header, or returns the 400 for a header that names
// an unknown class or one above the key's. Not inlined: its error's
// temporaries stay out of prepare's frame.
//
//go:noinline
func (x *exchange) checkPriority(r *http.Request, ks *clientkey.State) *apiError {
	p, msg := ks.RequestPriority(r.Header)
	if msg != "" {
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: msg}
	}
	x.priority = p
	return nil
}

// priorityAger is an Admitter whose waiters age through the classes (the
// in-process and the cluster controller).
type priorityAger interface {
	SetPriorityAging(time.Duration)
}

// applyPriorityAging passes the settings' priorityAgingMs to admission.
func (g *Gateway) applyPriorityAging(d time.Duration) {
	if a, ok := g.ctrl.(priorityAger); ok {
		a.SetPriorityAging(d)
	}
}
