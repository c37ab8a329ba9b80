package httpkit

import (
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// The types below are the wire shape of GET /api/v1/gates (and /live): the JSON tags
// of the live view live here, at the API edge, and nowhere else. newGatesView fills
// them from a live.Snapshot.

// GatesView is the body of GET /api/v1/gates.
type GatesView struct {
	Gates       []GateView       `json:"gates"`
	Connections []ConnectionLive `json:"connections"`
	// Cluster is set in cluster mode only: then InFlight and Queued of every gate are
	// cluster-wide counts, and the other counters this replica's.
	Cluster *ClusterView `json:"cluster,omitempty"`
	// Clients lists every client key's load on this replica (live.Client).
	Clients []ClientLive `json:"clients"`
}

// ClientLive is one client key's weight, cap (0 = none) and load (live.Client).
type ClientLive struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Weight   int    `json:"weight"`
	Cap      int    `json:"cap"`
	Priority string `json:"priority"`
	InFlight int    `json:"inFlight"`
	Queued   int    `json:"queued"`
	// QueuedByPriority splits Queued by the class the requests asked for; absent
	// when none wait.
	QueuedByPriority map[string]int `json:"queuedByPriority,omitempty"`
	Admitted         int64          `json:"admitted"`
	Timeouts         int64          `json:"timeouts"`
}

// ClusterView is cluster mode's state as this replica sees it (live.Cluster).
type ClusterView struct {
	// Mode is live.ClusterRedisOK, or the fail mode in force while Redis is away.
	Mode      string `json:"mode"`
	ReplicaID string `json:"replicaId"`
	// Replicas counts the live replicas last seen in Redis, this one included.
	Replicas int  `json:"replicas"`
	Degraded bool `json:"degraded"`
}

// GateView is one admission gate: its cap, load and counters (live.Gate; the wait
// histogram is the dashboard's and is not sent).
type GateView struct {
	Key   string `json:"key"`
	Level string `json:"level"`
	Cap   int    `json:"cap"`
	// EffectiveCap is the cap admission enforces (the learned one on an adaptive
	// gate); Adaptive marks such a gate.
	EffectiveCap int  `json:"effectiveCap"`
	Adaptive     bool `json:"adaptive,omitempty"`
	// Shadow marks a shadow gate, which alone carries WouldQueue, PeakInFlight and
	// ShadowSince.
	Shadow       bool       `json:"shadow,omitempty"`
	WouldQueue   *int64     `json:"wouldQueue,omitempty"`
	PeakInFlight *int       `json:"peakInFlight,omitempty"`
	ShadowSince  *time.Time `json:"shadowSince,omitempty"`
	InFlight     int        `json:"inFlight"`
	Queued       int        `json:"queued"`
	Admitted     int64      `json:"admitted"`
	Timeouts     int64      `json:"timeouts"`
	QueueFull    int64      `json:"queueFull"`
	Cancels      int64      `json:"cancels"`
	WaitMsTotal  int64      `json:"waitMsTotal"`

	// QueuedByClient splits Queued by client key id ("" for requests of no
	// key); absent when nobody is queued on the gate.
	QueuedByClient map[string]int `json:"queuedByClient,omitempty"`
	// QueuedByPriority splits Queued by the class the waiters asked for
	// (interactive, standard, batch); absent when nobody is queued on the gate.
	QueuedByPriority map[string]int `json:"queuedByPriority,omitempty"`
}

// ConnectionLive is one connection's health and remaining rate-limit budgets. Until is
// always sent (null when the state has no end), as DESIGN.md lists it among the keys.
type ConnectionLive struct {
	ID      string                `json:"id"`
	Name    string                `json:"name"`
	Health  string                `json:"health"`
	Until   *time.Time            `json:"until"`
	Reason  string                `json:"reason,omitempty"`
	Budgets map[string]BudgetView `json:"budgets"`
	// Windows are the usage windows of a subscription-style account, as its
	// latest answer reported them (never null; empty when none).
	Windows []WindowView `json:"windows"`
}

// WindowView is one usage window: the fraction used and when it resets
// (null when the upstream did not say).
type WindowView struct {
	Name     string     `json:"name"`
	Used     float64    `json:"used"`
	ResetsAt *time.Time `json:"resetsAt"`
}

// BudgetView is one rate-limit window: its limit, what is left and when it resets.
type BudgetView struct {
	Limit     int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	ResetAt   time.Time `json:"resetAt"`
}

// NewGatesView is snap in the API's shape: lists and budget maps never null.
func NewGatesView(snap live.Snapshot) GatesView {
	v := GatesView{
		Gates:       make([]GateView, 0, len(snap.Gates)),
		Connections: make([]ConnectionLive, 0, len(snap.Connections)),
		Clients:     make([]ClientLive, 0, len(snap.Clients)),
	}
	for _, c := range snap.Clients {
		v.Clients = append(v.Clients, ClientLive{ID: c.ID, Name: c.Name, Weight: c.Weight, Cap: c.Cap, Priority: c.Priority,
			InFlight: c.InFlight, Queued: c.Queued, QueuedByPriority: c.QueuedByPriority, Admitted: c.Admitted, Timeouts: c.Timeouts})
	}
	for _, g := range snap.Gates {
		gv := GateView{
			Key: g.Key, Level: g.Level, Cap: g.Cap, EffectiveCap: g.EffectiveCap, Adaptive: g.Adaptive,
			InFlight: g.InFlight, Queued: g.Queued, QueuedByClient: g.QueuedByClient, QueuedByPriority: g.QueuedByPriority,
			Admitted: g.Admitted, Timeouts: g.Timeouts, QueueFull: g.QueueFull, Cancels: g.Cancels,
			WaitMsTotal: g.WaitTotal.Milliseconds(),
		}
		if g.Shadow {
			wq, peak, since := g.WouldQueue, g.PeakInFlight, g.ShadowSince
			gv.Shadow, gv.WouldQueue, gv.PeakInFlight, gv.ShadowSince = true, &wq, &peak, &since
		}
		v.Gates = append(v.Gates, gv)
	}
	for _, c := range snap.Connections {
		v.Connections = append(v.Connections, ConnectionLiveOf(c))
	}
	if c := snap.Cluster; c != nil {
		v.Cluster = &ClusterView{Mode: c.Mode, ReplicaID: c.ReplicaID, Replicas: c.Replicas, Degraded: c.Degraded}
	}
	return v
}

// ConnectionLiveOf is c in the API's shape.
func ConnectionLiveOf(c live.Connection) ConnectionLive {
	cl := ConnectionLive{ID: c.ID, Name: c.Name, Health: c.Health, Reason: c.Reason,
		Budgets: make(map[string]BudgetView, len(c.Budgets)), Windows: make([]WindowView, 0, len(c.Windows))}
	for _, w := range c.Windows {
		wv := WindowView{Name: w.Name, Used: w.Used}
		if !w.ResetsAt.IsZero() {
			r := w.ResetsAt
			wv.ResetsAt = &r
		}
		cl.Windows = append(cl.Windows, wv)
	}
	for name, b := range c.Budgets {
		cl.Budgets[name] = BudgetView{Limit: b.Limit, Remaining: b.Remaining, ResetAt: b.ResetAt}
	}
	if !c.Until.IsZero() {
		u := c.Until
		cl.Until = &u
	}
	return cl
}

// LiveSnapshot returns the gateway's live view (empty without a gateway).
func (s *Core) LiveSnapshot() live.Snapshot {
	if s.deps.Gates == nil {
		return live.Snapshot{}
	}
	return s.deps.Gates.Snapshot()
}
