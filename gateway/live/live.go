// Package live is Gatehouse's live view, defined once: a Snapshot of the
// admission gates (with each gate's connection, provider and model as
// fields), every connection's health and rate-limit budgets, and cluster
// mode, with the constants of gate levels, health states, budget names and
// cluster modes.
//
// package gateway produces a Snapshot and package gateway/cluster its
// Cluster part; handlers (which adds JSON tags at the API edge only) and web
// read it as it is. Gate-key strings are opaque here: only gateway and
// gateway/cluster build or parse them, and everyone else reads the fields of
// Gate. The package imports the standard library only, so that admission can
// count into its WaitHistogram and web can draw from it without importing
// either gateway or admission.
package live

import "time"

// Gate levels, outermost first: a request of a client key with a cap passes
// its key gate, and every request the global gate, its connection's
// provider gate, its connection gate and its model gate.
const (
	LevelKey        = "key"
	LevelGlobal     = "global"
	LevelProvider   = "provider"
	LevelConnection = "connection"
	LevelModel      = "model"
)

// Health states of a connection.
const (
	HealthOK          = "ok"
	HealthCooling     = "cooling"
	HealthSuspended   = "suspended"
	HealthBreakerOpen = "breaker-open"
	HealthHalfOpen    = "half-open"
)

// Budget names: a connection's rate-limit windows.
const (
	BudgetRPM = "rpm"
	BudgetRPD = "rpd"
	BudgetTPM = "tpm"
	BudgetTPD = "tpd"
)

// Cluster modes, as Cluster.Mode holds them.
const (
	ClusterRedisOK    = "redis-ok"    // caps shared through Redis
	ClusterFailOpen   = "fail-open"   // Redis away: each replica admits its share of each cap
	ClusterFailClosed = "fail-closed" // Redis away: requests get 503 CLUSTER_UNAVAILABLE
)

// Snapshot is the live state of the gates, of each connection's health and,
// in cluster mode, of the cluster.
type Snapshot struct {
	// LoadedAt is when the gateway configuration in force was applied (zero before).
	LoadedAt time.Time
	// Gates lists every connection gate (cap 0 = uncapped), every capped
	// gate (model gates included, idle or not), and any other gate holding
	// or queueing requests. Sorted by key.
	Gates []Gate
	// Connections lists every configured connection in config order.
	Connections []Connection
	// Cluster is set in cluster mode only: then InFlight and Queued of every
	// gate are cluster-wide counts, and the other counters this replica's.
	Cluster *Cluster
	// Clients lists every configured client key's load on this replica, by
	// name.
	Clients []Client
}

// Client is one client key's load: its weight and cap (0 = none), its
// requests holding a permit and waiting for one, and, when it has a key
// gate, that gate's admissions and timeouts.
type Client struct {
	ID       string
	Name     string
	Weight   int
	Cap      int
	Priority string // the key's class: "interactive", "standard" or "batch"
	InFlight int
	Queued   int
	// QueuedByPriority splits Queued by the class the requests asked for
	// (the key's, or lower by X-Gatehouse-Priority); nil when none wait.
	QueuedByPriority map[string]int
	Admitted         int64
	Timeouts         int64
}

// Gate is one admission gate: who it belongs to, its cap, load and counters.
type Gate struct {
	// Key names the gate (unique in a Snapshot). Treat it as opaque: the
	// fields below say what the gate belongs to.
	Key   string
	Level string // a Level* constant
	// ConnectionID is the connection of a connection or model gate.
	ConnectionID string
	// Provider is the provider of a provider gate, and the connection's
	// provider for a connection or model gate when the gateway knows it.
	Provider string
	// Model is the upstream model id of a model gate.
	Model string
	// Cap is the configured cap; 0 = uncapped. For a shadow gate it is the
	// shadow cap.
	Cap int
	// EffectiveCap is the cap admission enforces: on a gate of an adaptive
	// connection the learned cap (1…Cap), else Cap.
	EffectiveCap int
	// Adaptive marks a gate whose EffectiveCap is learned from the upstream.
	Adaptive bool
	// Shadow marks a shadow gate: counted, never enforced. Its InFlight is
	// the dispatched requests on its path; WouldQueue counts those that
	// arrived while InFlight was already at or above Cap, and PeakInFlight is
	// the most at once, both since ShadowSince (when the shadow cap was set).
	// Queued and the admission counters stay 0.
	Shadow       bool
	WouldQueue   int64
	PeakInFlight int
	ShadowSince  time.Time
	// InFlight is the requests holding the gate; Queued those it blocks.
	InFlight int
	Queued   int
	// QueuedByClient splits Queued by client key id (nil when nobody waits;
	// waiters of no key count under "").
	QueuedByClient map[string]int
	// QueuedByPriority splits Queued by the priority class the waiters asked
	// for ("interactive", "standard", "batch"; nil when nobody waits).
	QueuedByPriority map[string]int
	// Admitted counts admissions through the gate; Timeouts, QueueFull and
	// Cancels the requests that ended waiting on it.
	Admitted  int64
	Timeouts  int64
	QueueFull int64
	Cancels   int64
	// WaitTotal sums the waits of the admitted requests.
	WaitTotal time.Duration
	// Waits counts the admissions through the gate by how long they waited;
	// two snapshots' difference gives the wait quantiles between them.
	Waits WaitHistogram
}

// Connection is one connection's upstream health and rate-limit budgets.
type Connection struct {
	ID       string
	Name     string
	Provider string
	// Health is a Health* constant.
	Health string
	// Until is when the state ends (zero for ok and half-open). For
	// cooling it is the end of the latest model cooldown.
	Until time.Time
	// Reason says why, in words (e.g. "429 from upstream"); may be empty.
	Reason string
	// Budgets are the connection's rate-limit windows by Budget* name, only
	// those with a limit set; nil when none is. The rpm budget counts
	// dispatches in the current clock minute (rpm is enforced as a spacing,
	// so it never runs out early).
	Budgets map[string]Budget
	// Windows are the usage windows the connection's latest answer
	// reported (subscription accounts: "5h", "7d"), nil when none.
	Windows []Window
}

// Window is one usage window of a subscription-style account: the fraction
// used (0–1) and when it resets (zero when not reported).
type Window struct {
	Name     string
	Used     float64
	ResetsAt time.Time
}

// Budget is one rate-limit window of a connection: its limit, what is left
// and when the window resets. Remaining is negative when a tpm window is in
// debt (the upstream reported more tokens than were left).
type Budget struct {
	Limit     int64
	Remaining int64
	ResetAt   time.Time
}

// Cluster is cluster mode as this replica sees it.
type Cluster struct {
	// Mode is ClusterRedisOK, or the fail mode in force while Redis is away.
	Mode      string
	ReplicaID string
	// Replicas counts the live replicas last seen in Redis, this one included.
	Replicas int
	// Degraded is true while Redis is away.
	Degraded bool
}

// ClientsByID indexes client keys (a Snapshot's Clients) by id.
func ClientsByID(clients []Client) map[string]Client {
	m := make(map[string]Client, len(clients))
	for _, c := range clients {
		m[c.ID] = c
	}
	return m
}

// Client is the client key id of s, and false when s does not list it.
func (s *Snapshot) Client(id string) (Client, bool) {
	for _, c := range s.Clients {
		if c.ID == id {
			return c, true
		}
	}
	return Client{}, false
}
