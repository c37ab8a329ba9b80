package gateway

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// permit is an admitted request's hold on its gates, as Options.Admission
// grants it (*admission.Permit, or a cluster lease).
type permit = admission.Grant

// tryAdmit is ctrl.TryAcquire(req). With the in-process controller the
// exchange's first admission goes into x.slot, and its *Permit, a pointer,
// is the Grant: nothing is allocated (through Local.TryAcquire the permit
// escapes into the interface, one allocation per request). Later admissions of the same
// exchange (after a failover or a re-choice) get their own permit, so a
// permit is never reused, however its holder treats it.
func (x *exchange) tryAdmit(req admission.Request) (permit, bool) {
	if c := x.g.local; c != nil && !x.slotUsed {
		if !c.TryAcquireInto(req, &x.slot) {
			return nil, false
		}
		x.slotUsed = true
		return &x.slot, true
	}
	return x.g.ctrl.TryAcquire(req)
}

// errClusterUnavailable is the 503 sent while a shared admission store
// is unreachable and the controller runs fail-closed.
var errClusterUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: CodeClusterUnavailable,
	Message: "the shared admission store is unreachable; try again shortly", RetryAfter: 1}

// clusterUnavailable reports whether err says the shared admission store is
// unreachable (gateway/cluster's *UnavailableError matches the sentinel).
func clusterUnavailable(err error) bool { return errors.Is(err, admission.ErrUnavailable) }

// logAdmitErr logs an admission error that was neither typed nor the client
// leaving, at most once a minute.
func (g *Gateway) logAdmitErr(err error) {
	now := time.Now().UnixNano()
	last := g.admitErrAt.Load()
	if now-last >= int64(time.Minute) && g.admitErrAt.CompareAndSwap(last, now) {
		g.log.Warn("gateway: admission failed with an unexpected error; answered 503 "+CodeClusterUnavailable, slog.Any("error", err))
	}
}
