package admission

// Weighted fair share across client keys at each gate: start-time fair
// queueing on a virtual time per gate (docs/ADMISSION.md, "Fair share across
// client keys").
//
// The classes parked on a gate are grouped by client key into flows. A flow
// holds the start tag of its client's current turn at the gate; the gate's
// queue is a min-heap of flows by (tag, turn end, earliest head), and a
// flow is a min-heap of its classes by head arrival number, so a gate serves
// the client whose turn comes first, and within that client its earliest
// waiter (FIFO within a key, across the key's paths too). All of it runs only
// when a request has to wait: the uncontended path never touches it.

// fairUnit is the virtual length of one turn of weight 1; a turn of weight w
// lasts fairUnit / w. Integers: weights are 1–1000, so a turn is at least
// 1000 units and rounding costs at most a millionth of a share.
const fairUnit = 1_000_000

// TurnOf is the virtual length of one turn of a client of weight w at a gate
// (w clamped to 1–1000, so ≤ 0 means 1): fairUnit / w, an integer so that tags
// stay exact. The cluster ledger's tags use the same unit.
func TurnOf(w int) uint64 {
	return fairUnit / uint64(min(max(w, 1), 1000))
}

// flow is the waiters of one client key parked on one gate.
type flow struct {
	client string
	idx    int    // index in the gate's queue, while it is in it
	tag    uint64 // virtual start of the client's current turn at the gate
	fin    uint64 // virtual end of that turn: where its next one starts
	inc    uint64 // turn length, from the client's latest waiter here
	// classes is a min-heap of the client's classes on the gate by their
	// heads' arrival numbers.
	classes minHeap[*class, byArrival]
}

// waitQueue is a gate's queue at one priority level (gateQueue holds one
// per level): a binary min-heap of the flows parked there by (tag, fin,
// earliest head), with the level's virtual time vt (the largest tag
// admitted from it) and the ends of the turns of clients with no waiters
// left (fin; a client that comes back starts no earlier than that, so it
// cannot save up turns by leaving). Both maps are allocated the first time
// somebody waits there; flows is emptied as flows leave and fin when the
// queue empties (with vt), or pruned of entries vt has passed, so memory
// follows the clients waiting, not the clients seen. waiters counts the
// waiters of every class in it.
type waitQueue struct {
	items   minHeap[*flow, byTurn]
	waiters int
	vt      uint64
	flows   map[string]*flow
	fin     map[string]uint64
	finMax  int // len(fin) beyond which it is pruned
}

func (q *waitQueue) len() int { return len(q.items) }

// head is the class the gate serves next: its first flow's earliest class.
func (q *waitQueue) head() *class { return q.items[0].classes[0] }

// attach parks class k on g, at the level of its head's class at now (its
// priority, raised by aging: priority.go), in its client's flow there: a new
// flow starts its client's turn at max(vt, end of the client's last turn
// here), so an idle client earns no credit and a returning one cannot skip
// its turn.
func (c *Controller) attach(k *class, g *gate, now int64) {
	k.on = g
	k.level = uint8(c.levelAt(k, now))
	q := &g.queue.lv[k.level]
	f := q.flows[k.client]
	if f == nil {
		f = c.newFlow()
		f.client, f.inc = k.client, k.inc
		f.tag = max(q.vt, q.fin[k.client])
		f.fin = f.tag + f.inc
		if q.flows == nil {
			q.flows = make(map[string]*flow)
		}
		q.flows[k.client] = f
		f.classes.push(k)
		q.items.push(f)
	} else {
		f.inc = k.inc
		f.classes.push(k)
		q.items.fix(f) // a moved class may hold the flow's earliest waiter
	}
	k.fl = f
	q.waiters += k.size
	g.parked++
	if k.level > 0 {
		k.due = c.dueOf(k)
		g.queue.aging.push(k)
	}
}

// detach takes class k off its gate. A flow left empty leaves the queue and
// files where its client's next turn at the gate (at that level) starts: its
// tag, the start of a turn it has not used (admit advances it before the
// last waiter goes).
func (c *Controller) detach(k *class) {
	f, q := k.fl, k.queue()
	if k.ageIdx >= 0 {
		k.on.queue.aging.remove(k)
	}
	k.on.parked--
	f.classes.remove(k)
	q.waiters -= k.size
	k.on, k.fl = nil, nil
	if len(f.classes) > 0 {
		q.items.fix(f)
		return
	}
	q.items.remove(f)
	delete(q.flows, f.client)
	if q.len() == 0 {
		q.vt = 0
		clear(q.fin)
	} else {
		q.keepTurn(f.client, f.tag)
	}
	c.freeFlow(f)
}

// keepTurn files that client's next turn starts at tag. A turn vt has
// reached is no different from none; such entries are dropped, and pruned
// when the map has doubled since the last pruning.
func (q *waitQueue) keepTurn(client string, tag uint64) {
	if tag <= q.vt {
		delete(q.fin, client) // a no-op on a nil map
		return
	}
	if q.fin == nil {
		q.fin = make(map[string]uint64)
	}
	q.fin[client] = tag
	if len(q.fin) > q.finMax {
		for cl, t := range q.fin {
			if t <= q.vt {
				delete(q.fin, cl)
			}
		}
		q.finMax = max(64, 2*len(q.fin))
	}
}

// served records that the head of f's earliest class is admitted from the
// gate: virtual time reaches the turn's start and the client's next turn
// begins where this one ends.
func (q *waitQueue) served(f *flow) {
	q.vt = max(q.vt, f.tag)
	f.tag = max(q.vt, f.fin)
	f.fin = f.tag + f.inc
}

func (c *Controller) newFlow() *flow {
	if f := c.freeFlows.get(); f != nil {
		return f
	}
	return &flow{}
}

func (c *Controller) freeFlow(f *flow) {
	classes := f.classes[:0]
	*f = flow{classes: classes}
	c.freeFlows.put(f)
}

// flowBefore is the gate's order: the earlier turn; of turns starting
// together the one that ends first (the heavier client's: a turn's length
// is fixed when it starts, so a later weight changes no order); then the
// earlier waiter.
func flowBefore(a, b *flow) bool {
	return a.tag < b.tag || a.tag == b.tag && (a.fin < b.fin ||
		a.fin == b.fin && a.classes[0].head.seq < b.classes[0].head.seq)
}
