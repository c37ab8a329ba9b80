package cluster

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// gateState is this replica's view of one gate. Guarded by Controller.mu.
type gateState struct {
	key, level string
	// Redis names, computed once (the scripts name the others from key).
	hKey, xKey, wKey, channel string
	// keyArg, hKeyArg and capArg are key, hKey and cap boxed for script and
	// transaction arguments, once per gate and per cap (setCap), not once
	// per request.
	keyArg, hKeyArg, capArg any

	cap    int
	parked []*waiter // local waiters parked here, by (arrival, member)
	held   int       // slots held by this replica's permits
	// pending counts fail-open permits through g not yet in the ledger.
	pending int
	// waiting counts local waiters whose path includes the gate.
	waiting int
	// count and queued are the gate's cluster-wide holders and queue as
	// last seen (heartbeat, attempts), adjusted by local admissions; count
	// leaves out the leases this replica keeps (counted).
	count, queued int
	// seen is when Redis last counted the gate for this replica (c.now());
	// idle counts the leases kept through it (keep.go).
	seen time.Duration
	idle int

	// wakes counts the wake-up messages heard for g, so a waiter that parks
	// after one arrived (its script ran before the release, its local park
	// after) sees that it missed it.
	wakes uint64

	admitted, timeouts, queueFull, cancels int64
	waitTotal                              time.Duration
	holdMean                               float64
	// waits counts this replica's admissions through the gate by how long
	// they waited (each replica observes its own requests' waits, so the
	// replicas' histograms add up to the cluster's).
	waits live.WaitHistogram
}

func (c *Controller) newGate(level, key string) *gateState {
	if level == "" {
		level = admission.LevelOf(key)
	}
	g := &gateState{
		key: key, level: level,
		hKey: c.keys.holders(key), xKey: c.keys.expiry(key),
		wKey: c.keys.waiting(key), channel: c.keys.channel(key),
		keyArg: key, capArg: 0,
	}
	g.hKeyArg = g.hKey
	return g
}

// setCap sets g's cap and its boxed argument.
func (g *gateState) setCap(c int) {
	g.cap, g.capArg = c, c
}

// counted is a count of g's holders from Redis without the leases this
// replica keeps (idle): those hold no permit. With Controller.mu held.
func (g *gateState) counted(n int) int { return max(n-g.idle, 0) }

// quiet reports whether nobody waits on g as far as this replica knows.
// With Controller.mu held.
func (g *gateState) quiet() bool {
	return g.queued == 0 && g.waiting == 0 && len(g.parked) == 0
}

// roomy reports whether a release through g, just counted out of g.count,
// may be late — ride lazily in another call's pipeline, or keep its lease
// (keep.go): g is quiet, and even with the slot still held and the leases
// this replica keeps, g had at least half its cap free when last seen, so
// the slot given back a moment later keeps nobody from being admitted.
// With Controller.mu held.
func (g *gateState) roomy() bool {
	return g.cap > 0 && g.quiet() && 2*(g.count+g.idle+1) <= g.cap
}

const holdAlpha = 0.125

func (g *gateState) observeHold(d time.Duration) {
	if g.holdMean == 0 {
		g.holdMean = float64(max(d, 1))
		return
	}
	g.holdMean += holdAlpha * (float64(d) - g.holdMean)
}

// park inserts w in arrival order, so the first local waiter of each client
// key is that key's earliest here.
func (g *gateState) park(w *waiter) {
	i, _ := slices.BinarySearchFunc(g.parked, w, func(x, w *waiter) int {
		if c := cmp.Compare(x.arrival, w.arrival); c != 0 {
			return c
		}
		return strings.Compare(x.member, w.member)
	})
	g.parked = slices.Insert(g.parked, i, w)
}

// tagCost is the tag span of one admission at weight: admission.TurnOf, the
// in-process controller's unit, as a Redis score (exact: an integer).
func tagCost(weight int) int64 { return int64(admission.TurnOf(weight)) }

// costArgs holds tagCost of every weight boxed once, so a script's
// arguments do not allocate for it.
var costArgs = func() (a [1001]any) {
	for w := range a {
		a[w] = tagCost(w)
	}
	return a
}()

func costArg(weight int) any { return costArgs[min(max(weight, 1), 1000)] }

func (g *gateState) unpark(w *waiter) {
	if i := slices.Index(g.parked, w); i >= 0 {
		g.parked = slices.Delete(g.parked, i, i+1)
	}
}

// kickHeads wakes this replica's earliest waiter of each client key on g to
// re-check: one of them is first in line if any local waiter is (a key's
// later waiters are behind its earlier ones).
func (g *gateState) kickHeads() {
	switch len(g.parked) {
	case 0:
		return
	case 1:
		g.parked[0].kick()
		return
	}
	seen := make(map[string]bool, 4)
	for _, w := range g.parked {
		if !seen[w.key] {
			seen[w.key] = true
			w.kick()
		}
	}
}

// wake handles a wake-up message for g: it names the waiter first in line
// (kicked if it is this replica's), or is empty when the script could not
// tell (every local key's head is kicked).
func (g *gateState) wake(first string) {
	if first == "" {
		g.kickHeads()
		return
	}
	for _, w := range g.parked {
		if w.member == first {
			w.kick()
			return
		}
	}
}

// waiter is one request of this replica queued in Redis. Fields other than
// kickCh are guarded by Controller.mu.
type waiter struct {
	member string
	client any    // the fair-state field of its client key, "c:<id>" (clientField)
	key    string // its client key id (Request.Client), for Stats
	// priority is its class (Request.Priority), for Stats.
	priority admission.Priority
	// arrival is when it first queued (µs, Redis's clock; 0 before), kept
	// across moves so that it keeps its place among its key's waiters;
	// entry is its queue entry (fair.lua's entryOf), set with arrival.
	arrival int64
	entry   string
	path    []*gateState
	qgate   *gateState // its queue gate (Request.QueueKey)
	on      int        // index in path of the gate it is parked on; -1 none
	// found is, per gate of the path, the holders the admitting script found
	// there (-1: uncapped, or not known).
	found [maxPath]int32
	// unleased has bit i set when admit.lua admitted w without a lease on
	// path[i]: the gate was uncapped then (see Controller.admit).
	unleased uint8
	// marks are the path's wake counts when the last acquire script was sent.
	marks  [maxPath]uint64
	kickCh chan struct{}
}

// markWakes records the wake counts of w's path before an acquire script.
// c.mu must be held.
func (w *waiter) markWakes() {
	for i, g := range w.path {
		w.marks[i] = g.wakes
	}
}

// kickIfMissed re-checks w at once when a gate of its path was woken since
// markWakes: that wake-up was for a release the script may not have seen,
// and it reached this replica before w was parked to hear it. c.mu must be
// held.
func (w *waiter) kickIfMissed() {
	for i, g := range w.path {
		if g.wakes != w.marks[i] {
			w.kick()
			return
		}
	}
}

func (w *waiter) kick() {
	select {
	case w.kickCh <- struct{}{}:
	default:
	}
}

// notCounted is a path's found before any script counted it.
var notCounted = func() (a [maxPath]int32) {
	for i := range a {
		a[i] = -1
	}
	return a
}()

// setFound records the holders the admitting script found on each gate of
// w's path (-1 where it did not count them).
func (w *waiter) setFound(vals []int64) {
	for i := range w.path {
		w.found[i] = -1
		if i < len(vals) {
			w.found[i] = int32(vals[i])
		}
	}
}

// setArrival records the arrival the acquire script gave w and w's queue
// entry, "<client field>\x01<arrival, 16 digits>\x01<member>" as fair.lua
// builds it.
func (w *waiter) setArrival(arrival int64) {
	if w.arrival == arrival && w.entry != "" {
		return
	}
	w.arrival = arrival
	cf, _ := w.client.(string)
	w.entry = cf + "\x01" + fmt.Sprintf("%016d", arrival) + "\x01" + w.member
}
