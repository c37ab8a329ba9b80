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
	queue      waitQueue

	admitted, timeouts, queueFull, cancels int64
	waitTotal                              time.Duration
	holdMean                               float64 // EWMA of hold time, ns; 0 = no sample yet
	unsampled                              int     // admissions since the last hold sample
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
	seq        uint64 // arrival number: the order of every queue
	path       [maxPath]*gate
	n          int
	queueGate  *gate  // the gate whose queue depth counts this waiter
	cls        *class // the class it waits in, while it waits
	prev, next *waiter
	start      time.Time
	deadline   time.Time // zero = none of its own (the context may still end it)
	state      uint8
	admitted   time.Time // set when admitted
	drained    *Error    // set by Drain
	ch         chan struct{}
	timer      *time.Timer
}

// class holds the waiters of one path, in arrival order. Two requests on the
// same path are admissible under exactly the same conditions (every gate of
// the path has room), so the whole class parks on one full gate and moves as
// one: when its gate gains room but another gate of the path is full, moving
// the class is one heap operation however many waiters it holds. A newcomer
// joins the tail (its arrival number is the largest), so the list stays in
// arrival order without sorting. A class exists while it has waiters.
type class struct {
	path       [maxPath]*gate
	n          int
	on         *gate // the full gate it is parked on
	idx        int   // index in on.queue
	head, tail *waiter
	size       int
}

// gatePath is the map key of a class: the path's gates in order.
type gatePath = [maxPath]*gate

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

// waitQueue is a gate's queue: a binary min-heap of the classes parked on it,
// ordered by the arrival number of each class's head, so its minimum is the
// earliest waiter parked on the gate. A class moved here from another gate
// keeps its place among the earlier and later ones. waiters counts the
// waiters of every class in it (GateStats.Queued).
//
// The order is the head's arrival number today; start-time fair queueing
// across client keys would order the same heap by a virtual start tag
// instead (docs/ADMISSION.md, "Fair share").
type waitQueue struct {
	items   []*class
	waiters int
}

func (q *waitQueue) len() int     { return len(q.items) }
func (q *waitQueue) head() *class { return q.items[0] }

func (q *waitQueue) push(k *class) {
	k.idx = len(q.items)
	q.items = append(q.items, k)
	q.waiters += k.size
	q.up(k.idx)
}

func (q *waitQueue) remove(k *class) {
	i, last := k.idx, len(q.items)-1
	if i != last {
		q.swap(i, last)
	}
	q.items[last] = nil
	q.items = q.items[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	q.waiters -= k.size
	k.idx = -1
}

// fix restores the order after k's head changed (it can only get later).
func (q *waitQueue) fix(k *class) { q.down(k.idx) }

func (q *waitQueue) less(i, j int) bool { return q.items[i].head.seq < q.items[j].head.seq }

func (q *waitQueue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].idx = i
	q.items[j].idx = j
}

func (q *waitQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *waitQueue) down(i int) {
	n := len(q.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			return
		}
		q.swap(i, m)
		i = m
	}
}
