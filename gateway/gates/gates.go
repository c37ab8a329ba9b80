// Package gates names the gateway's admission gates and derives them from
// a config: the key of each gate ("global", "provider:<p>",
// "connection:<id>", "model:<id>:<M>", and the shadow gates'), the path a
// request to one connection's model takes through them, the caps a config
// sets (Spec, with the gates that learn their cap and the shadow gates),
// and the reading of a key back into a live.Gate. Gate keys are built and
// read here only (and by gateway/cluster, which keys Redis by them; a
// client key's gate is gateway/clientkey's); everyone else reads the
// fields of live.Gate.
//
// It never admits, counts or learns: admission, gateway/cluster and
// gateway/health do, under the keys and caps it gives them.
package gates

import (
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// Global is the key of the gateway-wide gate.
const Global = "global"

// Provider is the key of provider p's gate.
func Provider(p string) string { return "provider:" + p }

// Connection is the key of connection id's gate.
func Connection(id string) string { return "connection:" + id }

// Model is the key of the gate of model m on connection id.
func Model(id, m string) string { return "model:" + id + ":" + m }

// ShadowConnection and ShadowModel are the keys of the shadow gates
// (package health counts them).
func ShadowConnection(id string) string { return "shadow:connection:" + id }
func ShadowModel(id, m string) string   { return "shadow:model:" + id + ":" + m }

// Path is the gates a request to model m on connection id of provider p
// takes, outermost first.
func Path(p, id, m string) []admission.GateRef {
	return []admission.GateRef{
		{Level: live.LevelGlobal, Key: Global},
		{Level: live.LevelProvider, Key: Provider(p)},
		{Level: live.LevelConnection, Key: Connection(id)},
		{Level: live.LevelModel, Key: Model(id, m)},
	}
}

// Spec is the gates a config sets: every cap by key, the gates that learn
// their cap from the upstream (adaptive), and the shadow gates.
type Spec struct {
	Caps   map[string]int
	Learn  map[string]health.LearnSpec
	Shadow map[string]health.ShadowSpec
}

// NewSpec starts the spec of a config with settings eff: the global gate
// and every capped provider's. The global gate, like every connection
// gate, is named even when uncapped (0), so that the controller keeps its
// counters (and wait histogram) across reloads.
func NewSpec(eff limits.EffectiveSettings) Spec {
	sp := Spec{Caps: map[string]int{Global: max(eff.GlobalMaxConcurrent, 0)},
		Learn: map[string]health.LearnSpec{}, Shadow: map[string]health.ShadowSpec{}}
	for p, ps := range eff.Providers {
		if ps.MaxConcurrent > 0 {
			sp.Caps[Provider(p)] = ps.MaxConcurrent
		}
	}
	return sp
}

// AddConnection adds connection id's gates with its overrides o: its own
// cap, its models' caps, its shadow caps, and, when it is adaptive and
// capped, its capped gates as learning ones.
func (sp Spec) AddConnection(id string, o limits.Overrides) {
	key := Connection(id)
	sp.Caps[key] = 0
	if o.MaxConcurrent != nil && *o.MaxConcurrent > 0 {
		sp.Caps[key] = *o.MaxConcurrent
	}
	for m, n := range o.ModelConcurrency {
		if n > 0 {
			sp.Caps[Model(id, m)] = n
		}
	}
	if sh := o.Shadow; sh != nil {
		if sh.MaxConcurrent != nil && *sh.MaxConcurrent > 0 {
			sp.Shadow[ShadowConnection(id)] = health.ShadowSpec{ConnID: id, Cap: *sh.MaxConcurrent}
		}
		for m, n := range sh.ModelConcurrency {
			if n > 0 {
				sp.Shadow[ShadowModel(id, m)] = health.ShadowSpec{ConnID: id, Model: m, Cap: n}
			}
		}
	}
	if o.IsAdaptive() && sp.Caps[key] > 0 {
		sp.Learn[key] = health.LearnSpec{ConnID: id, Level: live.LevelConnection, Cap: sp.Caps[key]}
		for m, n := range o.ModelConcurrency {
			if n > 0 {
				sp.Learn[Model(id, m)] = health.LearnSpec{ConnID: id, Level: live.LevelModel, Cap: n}
			}
		}
	}
}

// Identity fills the Key, ConnectionID, Provider and Model of a live.Gate
// from the key of one of the gateway's gates. provider names a configured
// connection's provider (ok false for a connection not configured: one
// left over from an earlier config, still holding requests, has no
// provider); nil knows none.
func Identity(key, level string, provider func(connID string) (string, bool)) live.Gate {
	g := live.Gate{Key: key, Level: level}
	switch {
	case key == Global:
	case strings.HasPrefix(key, "provider:"):
		g.Provider = key[len("provider:"):]
	case strings.HasPrefix(key, "connection:"):
		g.ConnectionID = key[len("connection:"):]
	case strings.HasPrefix(key, "model:"):
		g.ConnectionID, g.Model = splitModel(key[len("model:"):], provider)
	}
	if provider != nil && g.ConnectionID != "" {
		if p, ok := provider(g.ConnectionID); ok {
			g.Provider = p
		}
	}
	return g
}

// splitModel splits "<id>:<M>" into the connection id and the model. A
// model id may hold colons ("llama3:8b"); so may, in principle, a
// connection id, so the first split naming a configured connection wins,
// else the first colon.
func splitModel(rest string, provider func(connID string) (string, bool)) (connID, model string) {
	if provider != nil {
		for i := range len(rest) {
			if rest[i] == ':' {
				if _, ok := provider(rest[:i]); ok {
					return rest[:i], rest[i+1:]
				}
			}
		}
	}
	connID, model, _ = strings.Cut(rest, ":")
	return connID, model
}

// Live is the live view of the gates in stats (admission's), each with its
// identity (Identity, with provider) and counters, the adaptive ones with
// their configured cap from configured and the learned one as effective.
// An uncapped gate that holds and queues nothing is left out, unless it is
// a connection gate (every connection shows its gate).
func Live(stats []admission.GateStats, configured map[string]int, provider func(connID string) (string, bool)) []live.Gate {
	var out []live.Gate
	for _, st := range stats {
		if st.Cap == 0 && st.Level != live.LevelConnection && st.InFlight == 0 && st.Queued == 0 {
			continue
		}
		gs := Identity(st.Key, st.Level, provider)
		gs.Cap, gs.EffectiveCap, gs.InFlight, gs.Queued = st.Cap, st.Cap, st.InFlight, st.Queued
		gs.QueuedByClient = st.QueuedByClient
		gs.QueuedByPriority = priorityNames(st.QueuedByPriority)
		if c, ok := configured[st.Key]; ok {
			gs.Cap, gs.Adaptive = c, true
		}
		gs.Admitted, gs.Timeouts, gs.QueueFull, gs.Cancels = st.Admitted, st.Timeouts, st.QueueFull, st.Cancels
		gs.WaitTotal, gs.Waits = st.WaitTotal, st.Waits
		out = append(out, gs)
	}
	return out
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
