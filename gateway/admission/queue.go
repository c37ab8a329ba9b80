package admission

import "time"

// park puts w, just counted in the depths of its path, in the class of its
// path, client and priority: a new class parked on g, the first full gate of
// the path, or the existing one, wherever it is parked (a full gate of the
// same path). inc is the turn length of w's client (TurnOf its weight); the
// client's latest waiter sets it. now is w's arrival (Controller.clock).
func (c *Controller) park(w *waiter, g *gate, client string, inc uint64, base uint8, now int64) {
	key := classKey{client: client, base: uint64(base)}
	copy(key.path[:], w.path[:w.n])
	k := c.classes[key]
	if k == nil {
		k = c.newClass()
		k.path, k.n, k.client, k.inc, k.base = key.path, w.n, client, inc, base
		k.append(w)
		c.classes[key] = k
		c.attach(k, g, now)
		return
	}
	k.append(w)
	k.inc = inc
	k.fl.inc = inc
	k.queue().waiters++
}

// unpark removes w from its class (and the class from its gate when it was
// the last one) and from the depth counts. A head that leaves hands its
// flow's turn to the next waiter: the tag does not move; the class is
// re-levelled for its new head at now (Controller.clock).
func (c *Controller) unpark(w *waiter, now int64) {
	k := w.cls
	q := k.queue()
	head := k.head == w
	k.unlink(w)
	q.waiters--
	switch {
	case k.size == 0:
		c.detach(k)
		delete(c.classes, classKey{k.path, uint64(k.base), k.client})
		c.freeClass(k)
	case head:
		c.headLeft(k, now)
	}
	for _, g := range w.path[:w.n] {
		g.waiting--
	}
	c.waiters--
}

// move parks class k, whose gate gained room but whose path is blocked at
// to (full), on to. Its waiters keep their arrival numbers and deadlines; on
// to it joins its client's flow at its level, or starts one as a newcomer
// would.
func (c *Controller) move(k *class, to *gate, now int64) {
	c.detach(k)
	c.attach(k, to, now)
	c.moves++
}

func (c *Controller) newClass() *class {
	if k := c.freeClasses.get(); k != nil {
		return k
	}
	return &class{ageIdx: -1}
}

func (c *Controller) freeClass(k *class) {
	*k = class{ageIdx: -1}
	c.freeClasses.put(k)
}

func (c *Controller) newWaiter() *waiter {
	if w := c.free.get(); w != nil {
		return w
	}
	return &waiter{ch: make(chan struct{}, 1)}
}

// recycle returns w to the free list; w must be neither parked nor signalled.
func (c *Controller) recycle(w *waiter) {
	timer, ch := w.timer, w.ch
	*w = waiter{ch: ch, timer: timer}
	c.free.put(w)
}

// release returns the slots of path and lets waiters on those gates in;
// measured says that start (Controller.nanos) is when they were taken.
func (c *Controller) release(path []*gate, start int64, measured bool) {
	var hold time.Duration
	if measured {
		hold = time.Duration(c.nanos() - start)
	}
	queued := false
	for i, g := range path {
		c.ids[i] = g.id
		g.held--
		if measured {
			g.observeHold(hold)
			g.unsampled = 0
		}
		queued = queued || g.parked != 0
	}
	if c.mem != nil {
		c.mem.Put(c.ids[:len(path)])
	} else {
		c.ledger.Put(c.ids[:len(path)])
	}
	if queued {
		c.drain(path)
	}
}

// drain admits or moves the classes parked on the gates in dirty, which may
// have gained room, until every one of those gates is full or has nobody
// parked on it. Each gate's next class is the first of its highest level
// (priority.go) in its fair-share order there (fair.go); across the gates,
// the one of the highest level, then the one whose next waiter arrived
// first, goes first. That class is checked: if its whole path has room its
// head is admitted, else the whole class moves, keeping its order, arrival
// numbers and deadlines, to the first full gate of its path; that gate is
// full, so nobody is left parked on a gate with room (no lost wake-up), and
// it stays full for the rest of the drain, so every class is moved at most
// once per drain, and a release moves each class parked on its gates at
// most once, however many waiters it holds (docs/ADMISSION.md, "Costs").
func (c *Controller) drain(dirty []*gate) {
	var now time.Time // read once per drain, when a gate has somebody to admit
	var ns int64
	read := false
	for {
		var best *gate
		var bk *class
		for _, g := range dirty {
			if g.parked == 0 || !c.hasRoom(g) {
				continue
			}
			if !read {
				now, read = c.now(), true
				ns = int64(now.Sub(c.epoch))
			}
			k := c.next(g, ns)
			if bk == nil || k.level < bk.level || k.level == bk.level && k.head.seq < bk.head.seq {
				best, bk = g, k
			}
		}
		if best == nil {
			return
		}
		if blocked := c.tryTake(bk.path[:bk.n]); blocked >= 0 {
			c.move(bk, bk.path[blocked], ns)
			continue
		}
		c.admit(bk.head, now, ns)
	}
}

// freeList keeps up to maxFree released waiters, classes or flows for reuse,
// so that a queue that fills and empties again allocates nothing.
type freeList[T any] []*T

const maxFree = 1024

// get returns a kept one, nil if none is left.
func (l *freeList[T]) get() *T {
	n := len(*l)
	if n == 0 {
		return nil
	}
	x := (*l)[n-1]
	*l = (*l)[:n-1]
	return x
}

func (l *freeList[T]) put(x *T) {
	if len(*l) < maxFree {
		*l = append(*l, x)
	}
}
