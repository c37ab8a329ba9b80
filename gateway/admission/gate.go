package admission

import (
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// GateRef names one gate on a request's path. Key starts with its level:
// "global", "provider:<p>", "connection:<id>", "model:<id>:<M>".
type GateRef struct {
	Level string
	Key   string
}

// LevelOf is the level a gate key starts with: the text before its first colon
// (the key of a gate that names no level is its own level). Gate keys are
// written by the gateway; LevelOf is the one reader of their level.
func LevelOf(key string) string {
	if i := strings.IndexByte(key, ':'); i >= 0 {
		return key[:i]
	}
	return key
}

// gate is one concurrency gate. Every field is guarded by Controller.mu.
type gate struct {
	key, level string
	id         int // ledger handle
	cap        int // 0 = never blocks
	held       int // slots held by this controller's permits
	waiting    int // waiters whose path includes this gate (queue depth)
	parked     int // classes parked on this gate, at every level

	admitted, timeouts, queueFull, cancels int64
	waitTotal                              time.Duration
	holdMean                               float64 // EWMA of hold time, ns; 0 = no sample yet
	unsampled                              int     // admissions since the last hold sample
	// queue holds the classes parked on the gate (priority.go, fair.go);
	// after the fields the uncontended path touches.
	queue gateQueue
	// waits counts the admissions that waited in a queue, by how long; those
	// admitted at once are admitted minus waits.Count() (see Controller.stats).
	// Last, so the fields the fast path touches stay together.
	waits live.WaitHistogram
}

// holdAlpha weighs the newest hold time in the gate's moving mean.
const holdAlpha = 0.125

func (g *gate) observeHold(d time.Duration) {
	if g.holdMean == 0 {
		g.holdMean = float64(max(d, 1))
		return
	}
	g.holdMean += holdAlpha * (float64(d) - g.holdMean)
}

// waiter states.
const (
	stateWaiting uint8 = iota
	stateAdmitted
	stateGone
	stateDrained // its wait was ended by Drain
)

// waiter is one parked request. It sits in the queue of its class, which is
// parked on exactly one full gate. Fields other than ch and timer are guarded
// by Controller.mu.
type waiter struct {
	seq        uint64 // arrival number: the order within a client key
	path       [maxPath]*gate
	n          int
	queueGate  *gate  // the gate whose queue depth counts this waiter
	cls        *class // the class it waits in, while it waits
	prev, next *waiter
	start      time.Time
	at         int64 // start on the controller's clock (Controller.clock)
	state      uint8
	admitted   time.Time // set when admitted
	drained    *Error    // set by Drain
	ch         chan struct{}
	timer      *time.Timer
}

// class holds the waiters of one client key and priority on one path, in
// arrival order (so its head has waited longest, and is the one whose class
// aging raises first).
// Two requests on the same path are admissible under exactly the same
// conditions (every gate of the path has room), so the whole class parks on
// one full gate and moves as one: when its gate gains room but another gate
// of the path is full, moving the class is one heap operation however many
// waiters it holds. A newcomer joins the tail (its arrival number is the
// largest), so the list stays in arrival order without sorting. On its gate
// the class sits in the flow of its client (fair.go). A class exists while
// it has waiters.
type class struct {
	path       [maxPath]*gate
	n          int
	client     string
	inc        uint64 // turn length of its latest waiter: fairUnit / weight
	base       uint8  // its priority's level (Priority.level)
	level      uint8  // the level it is parked at: base, raised by its head's aging
	on         *gate  // the full gate it is parked on
	fl         *flow  // its client's flow on that gate, at level
	idx        int    // index in fl.classes, while it is in it
	ageIdx     int    // index in on.queue.aging; -1 at level 0
	due        int64  // when it moves up a level (Controller.clock), if level > 0
	head, tail *waiter
	size       int
}

// gatePath is a path's gates in order.
type gatePath = [maxPath]*gate

// classKey is the map key of a class: its path, priority level and client
// key (the level a whole word beside the path, so that both hash as one
// block of memory).
type classKey struct {
	path   gatePath
	base   uint64
	client string
}

// queue is the fair-share queue of k's level on its gate.
func (k *class) queue() *waitQueue { return &k.on.queue.lv[k.level] }

// append adds w, the latest arrival, at the tail.
func (k *class) append(w *waiter) {
	w.cls, w.prev, w.next = k, k.tail, nil
	if k.tail == nil {
		k.head = w
	} else {
		k.tail.next = w
	}
	k.tail = w
	k.size++
}

// unlink removes w from the list.
func (k *class) unlink(w *waiter) {
	if w.prev == nil {
		k.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		k.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.cls, w.prev, w.next = nil, nil, nil
	k.size--
}
