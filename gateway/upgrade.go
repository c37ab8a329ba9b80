package gateway

import (
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// CheckUpgrade checks the client key of r, a WebSocket upgrade of
// /v1/responses, before the upgrade: the same checks as a request's
// (throttle of failed keys, unknown or disabled key, no config, shutdown).
// It reports true when the key may open a socket; otherwise it has answered
// r itself, in the OpenAI error shape, counted and logged like any request
// refused there.
func (g *Gateway) CheckUpgrade(w http.ResponseWriter, r *http.Request) bool {
	x := &exchange{g: g, st: wire.OpenAI, rt: route.Responses, start: time.Now()}
	_, _, aerr := g.authenticate(x, r)
	if aerr == nil {
		return true
	}
	w.Header()[HeaderQueueMs] = g.zeroMs
	wire.WriteError(w, x.st, aerr)
	x.status, x.failed = aerr.Status, aerr
	x.countClient()
	x.record(r)
	return false
}

// MaxBodyBytes is the bound on a client request body (Options.MaxBodyBytes).
func (g *Gateway) MaxBodyBytes() int64 { return g.maxBody }

// IdleBound is the settings' defaultExecutionMaxWaitMs in force (its
// default before the first config): how long a WebSocket may sit idle.
func (g *Gateway) IdleBound() time.Duration {
	if s := g.state.Load(); s != nil {
		return s.eff.DefaultExecutionMaxWait()
	}
	return time.Duration(limits.DefaultExecutionMaxWaitMs) * time.Millisecond
}
