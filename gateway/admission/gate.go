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

// levelOf is the level a key starts with: the text before its first colon.
func levelOf(key string) string {
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

// waiter is a request parked on exactly one full gate. Fields other than ch
// and timer are guarded by Controller.mu.
type waiter struct {
	seq       uint64 // arrival number: the order of every queue
	path      [maxPath]*gate
	n         int
	queueGate *gate // the gate whose queue depth counts this waiter
	on        *gate // the gate it is parked on
	idx       int   // index in on.queue
	start     time.Time
	deadline  time.Time // zero = none of its own (the context may still end it)
	state     uint8
	admitted  time.Time // set when admitted
	drained   *Error    // set by Drain
	ch        chan struct{}
	timer     *time.Timer
}

// waitQueue is a binary min-heap of waiters by arrival number: a waiter moved
// here from another gate keeps its place among the earlier and later ones.
type waitQueue struct{ items []*waiter }

func (q *waitQueue) len() int      { return len(q.items) }
func (q *waitQueue) head() *waiter { return q.items[0] }

func (q *waitQueue) push(w *waiter) {
	w.idx = len(q.items)
	q.items = append(q.items, w)
	q.up(w.idx)
}

func (q *waitQueue) remove(w *waiter) {
	i, last := w.idx, len(q.items)-1
	if i != last {
		q.swap(i, last)
	}
	q.items[last] = nil
	q.items = q.items[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	w.idx = -1
}

func (q *waitQueue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].idx = i
	q.items[j].idx = j
}

func (q *waitQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if q.items[p].seq <= q.items[i].seq {
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
		if r := l + 1; r < n && q.items[r].seq < q.items[l].seq {
			m = r
		}
		if q.items[i].seq <= q.items[m].seq {
			return
		}
		q.swap(i, m)
		i = m
	}
}
