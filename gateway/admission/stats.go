package admission

import (
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// GateStats is a snapshot of one gate.
type GateStats struct {
	Key   string
	Level string
	// Cap is the cap in force; 0 = uncapped.
	Cap int
	// InFlight is the slots held in the gate (by every replica, with a shared ledger).
	InFlight int
	// Queued is the waiters parked on this gate: those it blocks right now.
	// Each waiter is parked on exactly one gate, so Queued sums to the total.
	Queued int
	// QueuedByClient splits Queued by client key id (Request.Client; waiters
	// of no key count under ""); nil when nobody is parked on the gate.
	QueuedByClient map[string]int
	// QueuedByPriority splits Queued by the class the waiters asked for
	// (Request.Priority; aging does not change it); nil when nobody is
	// parked on the gate.
	QueuedByPriority map[Priority]int
	// Waiting is the waiters whose path includes this gate, wherever they are
	// parked: what Request.MaxQueueDepth counts for the gate.
	Waiting int
	// Admitted counts admissions through the gate.
	Admitted int64
	// Timeouts, QueueFull and Cancels count requests that ended on this gate
	// (the gate named in the *Error, or the one a cancelled waiter was parked on).
	Timeouts  int64
	QueueFull int64
	Cancels   int64
	// WaitTotal sums the waits of the requests admitted through the gate;
	// WaitTotal / Admitted is the mean wait.
	WaitTotal time.Duration
	// Waits counts the requests admitted through the gate by how long they
	// waited (bucket 0: admitted at once); Waits.Count() == Admitted. The
	// difference of two snapshots gives the wait quantiles between them.
	Waits live.WaitHistogram
	// MeanHold is the moving mean time a permit holds the gate (0 = none seen).
	MeanHold time.Duration
}

// Stats returns a snapshot of every gate, sorted by key.
func (c *Controller) Stats() []GateStats {
	c.mu.Lock()
	out := make([]GateStats, 0, len(c.gates))
	for _, g := range c.gates {
		out = append(out, c.stats(g))
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b GateStats) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func (c *Controller) stats(g *gate) GateStats {
	waits := g.waits
	// Immediate admissions skip the histogram to keep the fast path lean: they
	// are every admission the waiting ones do not account for.
	waits[0] += g.admitted - waits.Count()
	var byClient map[string]int
	var byPriority map[Priority]int
	if g.parked > 0 {
		byClient = make(map[string]int)
		byPriority = make(map[Priority]int, numLevels)
		for i := range g.queue.lv {
			for _, f := range g.queue.lv[i].items {
				for _, k := range f.classes {
					byClient[f.client] += k.size
					byPriority[Priorities[k.base]] += k.size
				}
			}
		}
	}
	return GateStats{
		Key:              g.key,
		Level:            g.level,
		Cap:              g.cap,
		InFlight:         c.ledger.InFlight(g.id),
		Queued:           g.queue.waiters(),
		QueuedByClient:   byClient,
		QueuedByPriority: byPriority,
		Waiting:          g.waiting,
		Admitted:         g.admitted,
		Timeouts:         g.timeouts,
		QueueFull:        g.queueFull,
		Cancels:          g.cancels,
		WaitTotal:        g.waitTotal,
		Waits:            waits,
		MeanHold:         time.Duration(g.holdMean),
	}
}

// Totals counts the controller's outcomes since New; unlike per-gate
// counters they survive the dropping of idle gates, so they suit /metrics.
type Totals struct {
	Admitted  int64
	Timeouts  int64
	QueueFull int64
	Cancels   int64
}

// Totals returns the controller-wide outcome counters.
func (c *Controller) Totals() Totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.totals
}
