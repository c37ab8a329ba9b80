package admission

import "time"

// Priority classes with aging (docs/ADMISSION.md, "Priority classes").
//
// A gate's queue has one fair-share queue (fair.go) per class, and serves
// the highest class that has waiters. A class of waiters (one path, one
// client key, one priority) sits in the level of its head's effective
// class: its own, raised one level for every PriorityAging its head has
// waited. The head is the class's oldest waiter, so no other waiter of the
// class is entitled to a higher level. Levels are kept exact without a
// timer: a class that is due to move up sits in its gate's aging heap (by
// the time its head moves up) and is moved when the gate is next asked for
// its next waiter, which is the only moment the order matters (a waiter is
// admitted only by a drain of the gate it is parked on); a class whose head
// leaves is re-levelled at once, since its next head may have waited less.

// Priority is a request's class at a saturated gate: a waiter of a higher
// class is admitted before any waiter of a lower one. The zero value is
// PriorityStandard.
type Priority int8

// The classes, highest first.
const (
	PriorityInteractive Priority = -1
	PriorityStandard    Priority = 0
	PriorityBatch       Priority = 1
)

// Priorities lists the classes, highest first.
var Priorities = [numLevels]Priority{PriorityInteractive, PriorityStandard, PriorityBatch}

// numLevels is the number of classes; level 0 is the highest.
const numLevels = 3

// DefaultPriorityAging is how long a waiter waits before it moves up one
// class when Options.PriorityAging is not set (DESIGN's priorityAgingMs).
const DefaultPriorityAging = 10 * time.Second

// String is the class's name: "interactive", "standard" or "batch".
func (p Priority) String() string {
	switch p.level() {
	case 0:
		return "interactive"
	case 2:
		return "batch"
	}
	return "standard"
}

// ParsePriority reads a class's name; ok is false for anything else.
func ParsePriority(s string) (p Priority, ok bool) {
	switch s {
	case "interactive":
		return PriorityInteractive, true
	case "standard":
		return PriorityStandard, true
	case "batch":
		return PriorityBatch, true
	}
	return PriorityStandard, false
}

// level is the class's queue level, 0 (interactive) to 2 (batch); values
// out of range count as the nearest class.
func (p Priority) level() int { return int(min(max(p, PriorityInteractive), PriorityBatch)) + 1 }

// SetPriorityAging changes how long a waiter waits before it moves up one
// class (≤ 0: DefaultPriorityAging). The waiters already parked are
// re-levelled against the new period at once.
func (c *Controller) SetPriorityAging(d time.Duration) {
	if d <= 0 {
		d = DefaultPriorityAging
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(d) == c.aging {
		return
	}
	c.aging = int64(d)
	now := c.clock()
	for _, k := range c.classes {
		g := k.on
		c.detach(k)
		c.attach(k, g, now)
	}
}

// clock is the controller's clock in nanoseconds since New (the unit of
// waiter.at and class.due).
func (c *Controller) clock() int64 { return int64(c.now().Sub(c.epoch)) }

// levelAt is the level class k belongs in at now: its priority's, raised
// one for every aging period its head has waited.
func (c *Controller) levelAt(k *class, now int64) int {
	lv := int(k.base)
	if lv == 0 {
		return 0
	}
	steps := (now - k.head.at) / c.aging
	return lv - int(min(steps, int64(lv)))
}

// dueOf is when class k, at level k.level > 0, moves up one level.
func (c *Controller) dueOf(k *class) int64 {
	return k.head.at + int64(int(k.base)-int(k.level)+1)*c.aging
}

// next is the class gate g serves next at now, after moving up the classes
// whose time has come: the first of its highest non-empty level (nil when
// nobody is parked on g).
func (c *Controller) next(g *gate, now int64) *class {
	q := &g.queue
	for len(q.aging) > 0 && q.aging[0].due <= now {
		k := q.aging[0]
		c.detach(k)
		c.attach(k, g, now)
	}
	return q.first()
}

// headLeft re-files class k (still parked, not empty) after its head left:
// at the level its new head belongs in (moving down when that one has waited
// less), else in place with its new head's times.
func (c *Controller) headLeft(k *class, now int64) {
	// The new head has waited less than the old one: it belongs lower
	// unless it too has waited the periods that raised the class to k.level.
	if k.level < k.base && now < k.head.at+int64(k.base-k.level)*c.aging {
		g := k.on
		c.detach(k)
		c.attach(k, g, now)
		return
	}
	k.fl.classes.sink(k) // a later head: it can only move down
	k.queue().items.fix(k.fl)
	if k.ageIdx >= 0 {
		k.due = c.dueOf(k)
		k.on.queue.aging.sink(k) // a later head: due only grows
	}
}

// gateQueue is a gate's queue: a fair-share queue per level, and the
// classes below level 0 by the time they move up.
type gateQueue struct {
	lv    [numLevels]waitQueue
	aging minHeap[*class, byDue]
}

// first is the first class of the highest non-empty level, nil if none:
// the gate's next class if no promotion is due (see Controller.next).
func (q *gateQueue) first() *class {
	for i := range q.lv {
		if q.lv[i].len() > 0 {
			return q.lv[i].head()
		}
	}
	return nil
}

// waiters counts the waiters parked on the gate (GateStats.Queued).
func (q *gateQueue) waiters() int {
	return q.lv[0].waiters + q.lv[1].waiters + q.lv[2].waiters
}
