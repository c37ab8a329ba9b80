// Package admission holds Gatehouse's concurrency gates: a Controller admits a
// request only when every gate on its path has room, takes one slot in each
// at once, and queues the rest fairly (at each gate FIFO within a client key
// and shared by weight across keys, no head-of-line blocking across gate
// keys) until they are admitted, time out, or are cancelled. Waiters are ordered by
// priority class first (interactive, standard, batch, with aging), then by the fair share.
//
// It also declares what the gateway and gateway/cluster share without importing each
// other: Admitter (Local wraps a Controller as one; cluster's Controller is the other),
// Grant, the typed Error (SEMAPHORE_TIMEOUT, SEMAPHORE_QUEUE_FULL, SHUTTING_DOWN) and
// ErrUnavailable. It imports only the standard library and gateway/live, whose wait
// histogram it counts into without allocating.
//
// docs/ADMISSION.md describes the algorithm, its invariants, its costs and why it is
// correct.
package admission

import (
	"context"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// maxPath is the longest path a request may name: four levels in practice.
const maxPath = 8

// Request asks for one slot in every gate of its path.
type Request struct {
	// Gates is the path, outermost first. An empty path is admitted at once.
	Gates []GateRef
	// MaxWait bounds the wait; when it runs out Acquire returns an *Error
	// with CodeTimeout. 0 (or less) sets no bound of its own. The context's
	// deadline bounds the wait too: whichever comes first ends it, and a
	// context that ends returns ctx.Err(), counted as a cancel.
	MaxWait time.Duration
	// QueueKey names the gate whose waiters MaxQueueDepth counts: every
	// waiter whose path includes that gate, wherever it is parked. Empty
	// means the path's first gate of level "connection", else its last gate.
	QueueKey string
	// MaxQueueDepth is how many such waiters may exist; a request that
	// would have to wait when there are already that many is rejected at
	// once with CodeQueueFull. 0 = unbounded.
	MaxQueueDepth int
	// Client names the client key the request is made for (its id; "" for
	// none, which is one client of its own). Waiters of one client are
	// admitted in arrival order; across clients a saturated gate's slots
	// are shared by Weight (docs/ADMISSION.md, "Fair share across client
	// keys").
	Client string
	// Weight is the client's share of a saturated gate, relative to the
	// other clients waiting there: 1–1000; 0 (or less) means 1.
	Weight int
	// Priority is the request's class: at a saturated gate a waiter of a
	// higher class is admitted before any of a lower one, and a waiter moves
	// up one class for every PriorityAging it has waited; within a class,
	// Client and Weight share the gate as above. The zero value is
	// PriorityStandard.
	Priority Priority

	// route caches the path as a Controller resolved it (see Prepare);
	// copies of a prepared Request share it.
	route *routeCache
}

// Options configures a Controller; the zero value is ready to use.
type Options struct {
	// Now is the clock (default time.Now). Waits themselves use real timers.
	Now func() time.Time
	// Ledger keeps slot counts (default NewMemoryLedger()).
	Ledger Ledger
	// DefaultHold is the hold time assumed for a gate before any release has
	// been observed on it, for EstimateWait and RetryAfter (default 1s).
	DefaultHold time.Duration
	// PriorityAging is how long a waiter waits before it moves up one
	// priority class (default DefaultPriorityAging; see SetPriorityAging).
	PriorityAging time.Duration
}

// Controller admits requests through gates. It is safe for concurrent use.
type Controller struct {
	mu          sync.Mutex
	now         func() time.Time
	ledger      Ledger
	defaultHold time.Duration
	gates       map[string]*gate
	gen         uint64        // bumped when a gate is dropped: resolvedRoutes older are stale
	mem         *memoryLedger // the ledger when it is the in-process one (direct calls)
	epoch       time.Time     // clock origin for nanos
	realClock   bool          // now is time.Now: nanos needs a single monotonic read
	aging       int64         // PriorityAging in nanoseconds
	seq         uint64
	waiters     int // waiters parked anywhere
	free        freeList[waiter]
	classes     map[classKey]*class // the class of every path and client with waiters
	freeClasses freeList[class]
	freeFlows   freeList[flow]
	// moves counts class moves from one gate to another (drain), for the
	// test that shows a release's work does not grow with the waiters.
	moves    uint64
	totals   Totals
	draining bool // set by Drain: nobody is let in or parked any more
	// scratch for ledger calls, so nothing on the hot path allocates
	ids, caps [maxPath]int
}

// New returns a Controller with no caps: every gate is uncapped until SetCaps.
func New(opts Options) *Controller {
	c := &Controller{
		now:         opts.Now,
		ledger:      opts.Ledger,
		defaultHold: opts.DefaultHold,
		gates:       make(map[string]*gate),
		classes:     make(map[classKey]*class),
	}
	if c.now == nil {
		c.now = time.Now
		c.realClock = true
	}
	c.epoch = c.now()
	if c.ledger == nil {
		c.ledger = NewMemoryLedger()
	}
	c.mem, _ = c.ledger.(*memoryLedger)
	if c.defaultHold <= 0 {
		c.defaultHold = time.Second
	}
	c.aging = int64(opts.PriorityAging)
	if c.aging <= 0 {
		c.aging = int64(DefaultPriorityAging)
	}
	return c
}

// Acquire waits until every gate on req's path has room, takes one slot in
// each, and returns the Permit that holds them. It returns an *Error (matching
// ErrTimeout or ErrQueueFull, or ErrShuttingDown after Drain) when it gives
// up, ctx.Err() when ctx ends first,
// and a plain error for a malformed path (more than 8 gates, a gate twice).
// If ctx is already done but every gate has room, Acquire may still succeed.
//
// The Permit does not escape into the heap unless the caller lets it, so a
// caller that keeps it on its stack acquires and releases without allocating.
func (c *Controller) Acquire(ctx context.Context, req Request) (p *Permit, err error) {
	p = &Permit{}
	if err = c.acquire(ctx, &req, p); err != nil {
		p = nil
	}
	return p, err
}

// TryAcquire admits req only if it can be admitted right now: every gate on
// its path has room, which also means no earlier waiter could use those slots
// (waiters are parked only on full gates). It never waits and counts nothing
// when it fails. After Drain it always fails.
func (c *Controller) TryAcquire(req Request) (*Permit, bool) {
	p := &Permit{}
	if !c.tryAcquire(&req, p) {
		return nil, false
	}
	return p, true
}

// AcquireInto is Acquire into a Permit the caller owns, for a caller that
// keeps its permit in a structure it allocates anyway (the gateway's
// per-request exchange), so that admission allocates nothing. p is
// overwritten; it must hold no slots, and the caller must not reuse it while
// anybody may still call Release on its earlier grant: the controller never
// reuses a Permit, the caller decides when its own is free. On error p
// grants nothing (its Release does nothing).
func (c *Controller) AcquireInto(ctx context.Context, req Request, p *Permit) error {
	*p = Permit{}
	err := c.acquire(ctx, &req, p)
	if err != nil {
		p.n = 0
	}
	return err
}

// TryAcquireInto is TryAcquire into a Permit the caller owns, as AcquireInto.
func (c *Controller) TryAcquireInto(req Request, p *Permit) bool {
	*p = Permit{}
	if !c.tryAcquire(&req, p) {
		p.n = 0
		return false
	}
	return true
}

func (c *Controller) acquire(ctx context.Context, req *Request, p *Permit) error {
	c.mu.Lock()
	w, err := c.submit(ctx, req, p)
	c.mu.Unlock()
	if err != nil || w == nil {
		return err
	}
	return c.wait(ctx, req, w, p)
}

func (c *Controller) tryAcquire(req *Request, p *Permit) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return false
	}
	n, err := c.resolve(req, &p.gates)
	if err != nil {
		return false
	}
	if n == 0 || c.tryTake(p.gates[:n]) < 0 {
		c.grant(p, n)
		return true
	}
	return false
}

// submit admits req into p at once if every gate has room, or parks it and
// returns its waiter, or rejects it. c.mu must be held.
func (c *Controller) submit(ctx context.Context, req *Request, p *Permit) (*waiter, error) {
	n, err := c.resolve(req, &p.gates)
	if err != nil {
		return nil, err
	}
	if c.draining {
		return nil, c.shuttingDown(req, p.gates[:n])
	}
	if n == 0 {
		c.grant(p, 0)
		return nil, nil
	}
	blocked := c.tryTake(p.gates[:n])
	if blocked < 0 {
		c.grant(p, n)
		return nil, nil
	}
	g := p.gates[blocked]
	qg := c.queueGate(req, p.gates[:n])
	// A request whose client has gone is a cancel, whatever the queue: checked
	// before queue-full so the counters say what happened.
	if err := ctx.Err(); err != nil {
		g.cancels++
		c.totals.Cancels++
		return nil, err
	}
	if req.MaxQueueDepth > 0 && qg.waiting >= req.MaxQueueDepth {
		qg.queueFull++
		c.totals.QueueFull++
		return nil, &Error{
			Code:       CodeQueueFull,
			Gate:       GateRef{Level: qg.level, Key: qg.key},
			RetryAfter: c.pathWait(p.gates[:n]),
		}
	}
	w := c.newWaiter()
	c.seq++
	w.seq = c.seq
	w.path = p.gates
	w.n = n
	w.queueGate = qg
	w.start = c.now()
	w.at = int64(w.start.Sub(c.epoch))
	for _, pg := range w.path[:n] {
		pg.waiting++
	}
	c.waiters++
	c.park(w, g, req.Client, TurnOf(req.Weight), uint8(req.Priority.level()), w.at)
	p.blocked = w.cls.on
	return w, nil
}

// wait blocks until w is admitted, times out or ctx ends.
func (c *Controller) wait(ctx context.Context, req *Request, w *waiter, p *Permit) error {
	var timeout <-chan time.Time
	if req.MaxWait > 0 {
		if w.timer == nil {
			w.timer = time.NewTimer(req.MaxWait)
		} else {
			w.timer.Reset(req.MaxWait)
		}
		timeout = w.timer.C
	}
	var err error
	select {
	case <-w.ch:
		c.mu.Lock()
		if w.state == stateDrained {
			err = w.drained
		}
	case <-ctx.Done():
		c.mu.Lock()
		err = c.abandon(w, ctx.Err())
	case <-timeout:
		c.mu.Lock()
		err = c.abandon(w, nil)
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	if err == nil {
		c.collect(w, p)
	} else if w.state == stateDrained {
		select {
		case <-w.ch: // Drain's wake-up, if the wait ended otherwise
		default:
		}
	}
	c.recycle(w)
	c.mu.Unlock()
	return err
}

// abandon ends w's wait: with cause (ctx.Err()) as a cancel, with nil as a
// timeout. If w was admitted meanwhile it returns nil and w keeps its slots.
// c.mu must be held.
func (c *Controller) abandon(w *waiter, cause error) error {
	if w.state == stateAdmitted {
		return nil
	}
	if w.state == stateDrained {
		return w.drained
	}
	g := w.cls.on
	now := c.now()
	c.unpark(w, int64(now.Sub(c.epoch)))
	w.state = stateGone
	if cause != nil {
		g.cancels++
		c.totals.Cancels++
		return cause
	}
	g.timeouts++
	c.totals.Timeouts++
	return &Error{
		Code:       CodeTimeout,
		Gate:       GateRef{Level: g.level, Key: g.key},
		Waited:     now.Sub(w.start),
		RetryAfter: c.pathWait(w.path[:w.n]),
	}
}

// collect moves an admitted waiter's result into p. c.mu must be held.
func (c *Controller) collect(w *waiter, p *Permit) {
	select {
	case <-w.ch: // drop the wake-up if the waiter did not consume it
	default:
	}
	p.c = c
	p.n = w.n
	p.gates = w.path
	p.start, p.measured = int64(w.admitted.Sub(c.epoch)), true
	p.waited = w.admitted.Sub(w.start)
}

func (c *Controller) queueGate(req *Request, path []*gate) *gate {
	if req.QueueKey != "" {
		for _, g := range path {
			if g.key == req.QueueKey {
				return g
			}
		}
	}
	for _, g := range path {
		if g.level == "connection" {
			return g
		}
	}
	return path[len(path)-1]
}

// tryTake takes a slot in every gate of path if all have room, returning -1,
// else the index of the first full gate.
func (c *Controller) tryTake(path []*gate) int {
	n := len(path)
	for i, g := range path {
		c.ids[i] = g.id
		c.caps[i] = g.cap
	}
	if c.mem != nil {
		return c.mem.TryTake(c.ids[:n], c.caps[:n])
	}
	return c.ledger.TryTake(c.ids[:n], c.caps[:n])
}

func (c *Controller) hasRoom(g *gate) bool {
	if g.cap == 0 {
		return true
	}
	if c.mem != nil {
		return c.mem.counts[g.id] < g.cap
	}
	return c.ledger.InFlight(g.id) < g.cap
}

// nanos reads the controller's clock as nanoseconds since New. With the real
// clock it is one monotonic read, half the cost of time.Now, which reads the
// wall clock too.
func (c *Controller) nanos() int64 {
	if c.realClock {
		return int64(time.Since(c.epoch))
	}
	return int64(c.now().Sub(c.epoch))
}

// grant records an immediate admission of the n gates already taken into p.
func (c *Controller) grant(p *Permit, n int) {
	p.c = c
	p.n = n
	c.totals.Admitted++
	if n == 0 {
		return
	}
	sample := false
	for _, g := range p.gates[:n] {
		g.held++
		g.admitted++
		g.unsampled++
		sample = sample || g.unsampled >= holdSampleEvery || g.holdMean == 0
	}
	// Reading the clock costs more than the rest of an admission on some
	// machines, so only a sample of immediate admissions measures its hold.
	if sample {
		p.start, p.measured = c.nanos(), true
	}
}

// holdSampleEvery: at least one in this many admissions through a gate
// measures its hold time.
const holdSampleEvery = 8

// admit records the admission at now (ns on the controller's clock) of a
// parked waiter whose slots drain took, and wakes it.
func (c *Controller) admit(w *waiter, now time.Time, ns int64) {
	w.cls.queue().served(w.cls.fl)
	c.unpark(w, ns)
	w.state = stateAdmitted
	c.totals.Admitted++
	w.admitted = now
	waited := w.admitted.Sub(w.start)
	bucket := live.WaitBucket(waited)
	for _, g := range w.path[:w.n] {
		g.held++
		g.admitted++
		g.waitTotal += waited
		g.waits[bucket]++
	}
	w.ch <- struct{}{}
}
