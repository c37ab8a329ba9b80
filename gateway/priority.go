package gateway

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// Priority classes (DESIGN.md, "Priority classes and client signals"): a
// client key has a class (limits "priority", default standard); a request
// may lower its own with X-Gatehouse-Priority, never raise it. Admission
// serves a higher class first at every saturated gate, ageing waiters up
// one class per priorityAgingMs (docs/ADMISSION.md, "Priority classes").

// HeaderPriority is the request header that lowers a request's class.
const HeaderPriority = "X-Gatehouse-Priority"

// canonical form, so that the header map is indexed without canonicalising.
const headerPriorityKey = "X-Gatehouse-Priority"

// numPriorities is the number of classes (admission.Priorities).
const numPriorities = len(admission.Priorities)

// priorityIndex is p's position in admission.Priorities (0 interactive).
func priorityIndex(p admission.Priority) int {
	for i, q := range admission.Priorities {
		if q == p {
			return i
		}
	}
	return 1
}

// keyPriority is the class of a key's limits (read fail-open: a name the
// limits package let through is always one of admission's).
func keyPriority(name string) admission.Priority {
	p, _ := admission.ParsePriority(name)
	return p
}

// checkPriority sets x.priority from the key's class and the request's
// X-Gatehouse-Priority header, or returns the 400 for a header that names
// an unknown class or one above the key's. Not inlined: its error's
// temporaries stay out of prepare's frame.
//
//go:noinline
func (x *exchange) checkPriority(r *http.Request, ks *keyState) *apiError {
	x.priority = ks.priority
	v := r.Header[headerPriorityKey]
	if len(v) == 0 {
		return nil
	}
	p, ok := admission.ParsePriority(v[0])
	if !ok || len(v) > 1 {
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidRequest,
			Message: HeaderPriority + " must be one of interactive, standard, batch (once); got " + strconv.Quote(v[0])}
	}
	if p < ks.priority {
		return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidRequest,
			Message: HeaderPriority + ": " + p.String() + " is above the " + ks.priority.String() +
				" class of client key " + strconv.Quote(ks.name) + "; a request may only lower its class"}
	}
	x.priority = p
	return nil
}

// priorityNames is admission's per-class count keyed by class name, nil
// when empty.
func priorityNames(by map[admission.Priority]int) map[string]int {
	if len(by) == 0 {
		return nil
	}
	out := make(map[string]int, len(by))
	for p, n := range by {
		if n > 0 {
			out[p.String()] = n
		}
	}
	return out
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
