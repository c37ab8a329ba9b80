package handlers

import (
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// GatesView is the body of GET /api/v1/gates and what the dashboard's live panels draw.
type GatesView struct {
	Gates       []GateView       `json:"gates"`
	Connections []ConnectionLive `json:"connections"`
	// Cluster is set in cluster mode only: then InFlight and Queued of every gate are
	// cluster-wide counts, and the other counters this replica's.
	Cluster *ClusterView `json:"cluster,omitempty"`
}

// Cluster modes as ClusterView.Mode reports them.
const (
	ClusterRedisOK    = "redis-ok"    // shared caps in Redis
	ClusterFailOpen   = "fail-open"   // Redis away: a per-replica share of each cap
	ClusterFailClosed = "fail-closed" // Redis away: requests get 503 CLUSTER_UNAVAILABLE
)

// ClusterView is cluster mode's state as this replica sees it.
type ClusterView struct {
	// Mode is ClusterRedisOK, or the fail mode in force while Redis is away.
	Mode      string `json:"mode"`
	ReplicaID string `json:"replicaId"`
	// Replicas counts the live replicas last seen in Redis, this one included.
	Replicas int  `json:"replicas"`
	Degraded bool `json:"degraded"`
}

// GateView is one admission gate: its cap, load and counters.
type GateView struct {
	Key         string `json:"key"`
	Level       string `json:"level"`
	Cap         int    `json:"cap"`
	InFlight    int    `json:"inFlight"`
	Queued      int    `json:"queued"`
	Admitted    int64  `json:"admitted"`
	Timeouts    int64  `json:"timeouts"`
	QueueFull   int64  `json:"queueFull"`
	Cancels     int64  `json:"cancels"`
	WaitMsTotal int64  `json:"waitMsTotal"`
	// Waits counts the admissions through the gate by how long they waited. The
	// dashboard takes its wait percentiles from it; the API does not send it.
	Waits admission.WaitHistogram `json:"-"`
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
}

// BudgetView is one rate-limit window: its limit, what is left and when it resets.
type BudgetView struct {
	Limit     int64     `json:"limit"`
	Remaining int64     `json:"remaining"`
	ResetAt   time.Time `json:"resetAt"`
}

// getGates serves GET /api/v1/gates: the gateway's live gates and connection health.
// Without a gateway both lists are empty.
func (s *Server) getGates(w http.ResponseWriter, r *http.Request) error {
	var v GatesView
	if s.deps.Gates != nil {
		v = s.deps.Gates.GatesSnapshot()
	}
	if v.Gates == nil {
		v.Gates = []GateView{}
	}
	if v.Connections == nil {
		v.Connections = []ConnectionLive{}
	}
	for i := range v.Connections {
		if v.Connections[i].Budgets == nil {
			v.Connections[i].Budgets = map[string]BudgetView{}
		}
	}
	return writeJSON(w, http.StatusOK, v, "")
}
