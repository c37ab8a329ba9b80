package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/probe"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// ProbeResult is what one test request through a connection got.
type ProbeResult = probe.Result

// The reasons Probe sends nothing.
var (
	ErrProbeNotLoaded = errors.New("gateway: no configuration is loaded yet")
	ErrProbeUnknown   = errors.New("gateway: the gateway does not know this connection yet")
	ErrProbeDisabled  = errors.New("gateway: the connection is disabled")
	ErrProbeNoModel   = errors.New("gateway: the connection lists no model that can be routed")
)

// probeKeyName is the client key name the test requests run under (their
// tokens and spend in the client metrics).
const probeKeyName = "(connection test)"

// Probe sends one tiny request (a one-line prompt, probe.MaxTokens of answer)
// for the first model of connection id, through the path every request takes
// — admission on the connection's gates, its rate budgets, the attempt and
// the relay — bound to that connection alone (no failover to another), and
// reports the answer. It reaches the upstream whatever the connection's
// health (breaker open, cooling, suspended) and its answer changes none of
// it: no breaker count, cooldown, suspension, learned cap or alert. It is not written to the request log. ctx bounds the
// whole request, its wait for admission included.
func (g *Gateway) Probe(ctx context.Context, id string) (ProbeResult, error) {
	s := g.state.Load()
	if s == nil || g.closed.Load() {
		return ProbeResult{}, ErrProbeNotLoaded
	}
	c := s.byID[id]
	switch {
	case c == nil:
		return ProbeResult{}, ErrProbeUnknown
	case !c.enabled:
		return ProbeResult{}, ErrProbeDisabled
	}
	var t *target
	for _, m := range c.models {
		for _, cand := range s.routes[c.style][m] {
			if cand.c == c && cand.model == m {
				t = cand
				break
			}
		}
		if t != nil {
			break
		}
	}
	if t == nil || !c.styleOK {
		return ProbeResult{}, ErrProbeNoModel
	}
	path, body := probe.Request(c.style, t.model)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return ProbeResult{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	w := &probe.Writer{}
	start := time.Now()
	x := &exchange{g: g, st: wire.OpenAI, start: start, probe: true}
	defer x.body.Release(g.bodyBytes)
	x.key = clientkey.New(ClientKey{Name: probeKeyName, Enabled: true}, nil, g.metrics.Client(probeKeyName))
	x.keyName, x.priority = probeKeyName, x.key.Priority
	if res, ok := x.probePrepare(w, r, s, t); !ok {
		res.Model, res.Latency = t.model, time.Since(start)
		return res, nil
	}
	x.run()
	return probe.Answer(t.model, w, x.failed, time.Since(start)), nil
}

// probeDone is a connection test's report to the breaker: none.
func probeDone(error) {}

// probePrepare does what prepare does for a client request, bar the client
// key, with t as the only target; on a refusal it returns the result to report.
func (x *exchange) probePrepare(w http.ResponseWriter, r *http.Request, s *state, t *target) (ProbeResult, bool) {
	rt, aerr := x.checkRoute(w, r)
	if aerr == nil {
		aerr = x.readBody(w, r)
	}
	if aerr == nil {
		aerr = x.route(s, r.URL.Path, rt)
	}
	if aerr != nil {
		return ProbeResult{Status: aerr.Status, Code: aerr.Code, Message: aerr.Message}, false
	}
	x.targets = []*target{t}
	x.w, x.r, x.s, x.rt = w, r, s, rt
	return ProbeResult{}, true
}
