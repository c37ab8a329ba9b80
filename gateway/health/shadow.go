package health

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// Shadow caps (DESIGN.md "Adaptive and shadow caps"): a connection's
// rateLimitOverrides.shadow names caps that are counted, never enforced.
// Each becomes a shadow gate (the gateway names it shadow:connection:<id>
// or shadow:model:<id>:<M>) that counts the requests dispatched on its path as
// a gate with that cap would, and records how many arrived while it would
// have been full (wouldQueue) and the most in flight at once (peakInFlight),
// since the shadow cap was set. Admission never sees a shadow gate: it delays
// and rejects nothing. The request path only does atomic adds on gates
// built at Apply, so it allocates nothing.

// ShadowGate is one shadow cap and what it has counted.
type ShadowGate struct {
	key, level    string
	connID, model string // model is "" for a connection gate

	cap        atomic.Int64
	inFlight   atomic.Int64
	wouldQueue atomic.Int64
	peak       atomic.Int64
	since      atomic.Int64 // unix nanoseconds (gateway clock) the cap was set
}

// enter counts a dispatched request: it would have queued when the gate
// already held its cap.
func (sg *ShadowGate) enter() {
	n := sg.inFlight.Add(1)
	if n-1 >= sg.cap.Load() {
		sg.wouldQueue.Add(1)
	}
	for {
		p := sg.peak.Load()
		if n <= p || sg.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (sg *ShadowGate) leave() { sg.inFlight.Add(-1) }

// Shadows keeps every shadow gate. Like a Conn, it outlives config
// snapshots: the gateway reconfigures it by key.
type Shadows struct {
	mu    sync.Mutex
	gates map[string]*ShadowGate
}

// NewShadows returns a Shadows with no gates.
func NewShadows() *Shadows { return &Shadows{gates: make(map[string]*ShadowGate)} }

// ShadowSpec is one shadow cap a config asks for: on a connection's gate
// (Model "") or on one of its model gates.
type ShadowSpec struct {
	ConnID, Model string
	Cap           int
}

// Configure sets the shadow gates (key → spec) at now and returns them by
// key. A gate whose cap changed (or that is new) starts counting afresh:
// wouldQueue 0, peak the requests in flight now; one whose cap stayed keeps
// its counts; gates not named are forgotten (a request still in flight
// there counts into a gate nobody reads any more).
func (s *Shadows) Configure(specs map[string]ShadowSpec, now time.Time) map[string]*ShadowGate {
	s.mu.Lock()
	defer s.mu.Unlock()
	forgetMissing(s.gates, specs)
	for key, sp := range specs {
		sg := s.gates[key]
		if sg == nil {
			sg = &ShadowGate{key: key, connID: sp.ConnID, model: sp.Model, level: levelConnection}
			if sp.Model != "" {
				sg.level = levelModel
			}
			s.gates[key] = sg
		}
		if sg.cap.Load() != int64(sp.Cap) || sg.since.Load() == 0 {
			sg.cap.Store(int64(sp.Cap))
			sg.wouldQueue.Store(0)
			sg.peak.Store(sg.inFlight.Load())
			sg.since.Store(now.UnixNano())
		}
	}
	return maps.Clone(s.gates)
}

// AppendGates adds every shadow gate to gates, as the live view shows
// them; provider names a connection's provider ("" when unknown).
func (s *Shadows) AppendGates(gates []live.Gate, provider func(connID string) string) []live.Gate {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sg := range s.gates {
		gs := live.Gate{
			Key: sg.key, Level: sg.level, ConnectionID: sg.connID, Model: sg.model, Shadow: true,
			Cap: int(sg.cap.Load()), InFlight: int(sg.inFlight.Load()), WouldQueue: sg.wouldQueue.Load(),
			PeakInFlight: int(sg.peak.Load()), ShadowSince: time.Unix(0, sg.since.Load()),
			Provider: provider(sg.connID),
		}
		gs.EffectiveCap = gs.Cap
		gates = append(gates, gs)
	}
	return gates
}

// The levels of shadow gates: those of the gates they shadow.
const (
	levelConnection = live.LevelConnection
	levelModel      = live.LevelModel
)

// ShadowPath is the shadow gates on one target's path; empty for most.
type ShadowPath []*ShadowGate

// Enter counts a dispatch on every gate of p.
func (p ShadowPath) Enter() {
	for _, sg := range p {
		sg.enter()
	}
}

// Leave ends a dispatch on every gate of p.
func (p ShadowPath) Leave() {
	for _, sg := range p {
		sg.leave()
	}
}
