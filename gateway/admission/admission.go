// Package admission holds Gatehouse's concurrency gates: a Controller admits a
// request only when every gate on its path has room, takes one slot in each
// at once, and queues the rest fairly (FIFO per gate, no head-of-line
// blocking across keys) until they are admitted, time out, or are cancelled.
//
// docs/ADMISSION.md describes the algorithm and why it is correct.
package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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

	// route caches the path as a Controller resolved it (see Prepare);
	// copies of a prepared Request share it.
	route *routeCache
}

// Prepare returns req with a cache for its resolved path, for a request
// that is reused many times (the gateway builds one per connection and
// model): a Controller then looks its gates up by key once, not on every
// acquisition, and re-resolves only after a gate was dropped (SetCaps) or
// when used with another Controller. Gates must not change afterwards;
// copies of the returned Request share the cache and may change the other
// fields. Other Admitters ignore the cache.
func Prepare(req Request) Request {
	req.route = &routeCache{}
	return req
}

// routeCache holds the latest resolution of a prepared Request's path.
type routeCache struct{ r atomic.Pointer[resolvedRoute] }

// resolvedRoute is immutable once stored, so several controllers and
// goroutines may read it without a lock; it is valid for c while c.gen is gen.
type resolvedRoute struct {
	c     *Controller
	gen   uint64
	n     int
	gates [maxPath]*gate
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
	seq         uint64
	waiters     int // waiters parked anywhere
	free        []*waiter
	classes     map[gatePath]*class // the class of every path with waiters
	freeClasses []*class
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
		classes:     make(map[gatePath]*class),
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
	blocked := -1
	if n > 0 {
		blocked = c.tryTake(p.gates[:n])
	}
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
	if req.MaxWait > 0 {
		w.deadline = w.start.Add(req.MaxWait)
	}
	for _, pg := range w.path[:n] {
		pg.waiting++
	}
	c.waiters++
	c.park(w, g)
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
	c.unpark(w)
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
		Waited:     c.now().Sub(w.start),
		RetryAfter: c.pathWait(w.path[:w.n]),
	}
}

// Drain ends the wait of every parked waiter with an *Error of
// CodeShuttingDown (matching ErrShuttingDown) naming the gate it was parked
// on, at once, and makes every later Acquire fail the same way and every
// later TryAcquire report false: a process that is shutting down tells its
// queued clients to go elsewhere instead of letting them wait for nothing.
// Permits already held are not touched; their Release works as before.
// Drained waiters count as cancels, not as rejections. Drain is idempotent.
func (c *Controller) Drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return
	}
	c.draining = true
	now := c.now()
	for _, g := range c.gates {
		for g.queue.len() > 0 {
			w := g.queue.head().head
			c.unpark(w)
			w.state = stateDrained
			w.drained = &Error{Code: CodeShuttingDown, Gate: GateRef{Level: g.level, Key: g.key}, Waited: now.Sub(w.start)}
			g.cancels++
			c.totals.Cancels++
			w.ch <- struct{}{}
		}
	}
}

// shuttingDown is the rejection of a request that arrives after Drain,
// naming the gate whose queue it would have joined. c.mu must be held.
func (c *Controller) shuttingDown(req *Request, path []*gate) *Error {
	e := &Error{Code: CodeShuttingDown}
	if len(path) > 0 {
		g := c.queueGate(req, path)
		e.Gate = GateRef{Level: g.level, Key: g.key}
	}
	return e
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
	p.start = int64(w.admitted.Sub(c.epoch)) + 1
	p.waited = w.admitted.Sub(w.start)
}

// park puts w, just counted in the depths of its path, in the class of its
// path: a new class parked on g, the first full gate of the path, or the
// existing one, wherever it is parked (a full gate of the same path).
func (c *Controller) park(w *waiter, g *gate) {
	var key gatePath
	copy(key[:], w.path[:w.n])
	k := c.classes[key]
	if k == nil {
		k = c.newClass()
		k.path, k.n, k.on = key, w.n, g
		k.append(w)
		c.classes[key] = k
		g.queue.push(k)
		return
	}
	k.append(w)
	k.on.queue.waiters++
}

// unpark removes w from its class (and the class from its gate's queue when
// it was the last one) and from the depth counts.
func (c *Controller) unpark(w *waiter) {
	k := w.cls
	q := &k.on.queue
	head := k.head == w
	k.unlink(w)
	q.waiters--
	switch {
	case k.size == 0:
		q.remove(k)
		delete(c.classes, k.path)
		c.freeClass(k)
	case head:
		q.fix(k)
	}
	for _, g := range w.path[:w.n] {
		g.waiting--
	}
	c.waiters--
}

// move parks class k, whose gate gained room but whose path is blocked at
// to (full), on to. Its waiters keep their arrival numbers and deadlines.
func (c *Controller) move(k *class, to *gate) {
	k.on.queue.remove(k)
	k.on = to
	to.queue.push(k)
	c.moves++
}

func (c *Controller) newClass() *class {
	if n := len(c.freeClasses); n > 0 {
		k := c.freeClasses[n-1]
		c.freeClasses = c.freeClasses[:n-1]
		return k
	}
	return &class{idx: -1}
}

func (c *Controller) freeClass(k *class) {
	*k = class{idx: -1}
	if len(c.freeClasses) < 1024 {
		c.freeClasses = append(c.freeClasses, k)
	}
}

func (c *Controller) newWaiter() *waiter {
	if n := len(c.free); n > 0 {
		w := c.free[n-1]
		c.free = c.free[:n-1]
		return w
	}
	return &waiter{ch: make(chan struct{}, 1)}
}

// recycle returns w to the free list; w must be neither parked nor signalled.
func (c *Controller) recycle(w *waiter) {
	timer, ch := w.timer, w.ch
	*w = waiter{ch: ch, timer: timer}
	if len(c.free) < 1024 {
		c.free = append(c.free, w)
	}
}

// resolve looks up (creating if needed) the gates of req's path into out,
// through req's route cache when it is prepared and still valid.
func (c *Controller) resolve(req *Request, out *[maxPath]*gate) (int, error) {
	refs := req.Gates
	if req.route != nil {
		if r := req.route.r.Load(); r != nil && r.c == c && r.gen == c.gen && r.n == len(refs) {
			*out = r.gates
			return r.n, nil
		}
		n, err := c.resolveKeys(refs, out)
		if err == nil {
			r := &resolvedRoute{c: c, gen: c.gen, n: n}
			copy(r.gates[:], out[:n])
			req.route.r.Store(r)
		}
		return n, err
	}
	return c.resolveKeys(refs, out)
}

// resolveKeys looks up (creating if needed) the gates of refs into out.
func (c *Controller) resolveKeys(refs []GateRef, out *[maxPath]*gate) (int, error) {
	if len(refs) > maxPath {
		return 0, fmt.Errorf("admission: path has %d gates, at most %d", len(refs), maxPath)
	}
	for i := range refs {
		g := c.gates[refs[i].Key]
		if g == nil {
			if refs[i].Key == "" {
				return 0, errors.New("admission: gate with an empty key")
			}
			g = c.addGate(refs[i].Level, refs[i].Key)
		}
		for j := range i {
			if out[j] == g {
				return 0, fmt.Errorf("admission: gate %s named twice in one path", g.key)
			}
		}
		out[i] = g
	}
	return len(refs), nil
}

func (c *Controller) addGate(level, key string) *gate {
	if level == "" {
		level = levelOf(key)
	}
	g := &gate{key: key, level: level, id: c.ledger.Open(key)}
	c.gates[key] = g
	return g
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

// nanos reads the controller's clock as nanoseconds since New, plus one (so
// that 0 can mean "not measured"). With the real clock it is one monotonic
// read, half the cost of time.Now, which reads the wall clock too.
func (c *Controller) nanos() int64 {
	if c.realClock {
		return int64(time.Since(c.epoch)) + 1
	}
	return int64(c.now().Sub(c.epoch)) + 1
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
		p.start = c.nanos()
	}
}

// holdSampleEvery: at least one in this many admissions through a gate
// measures its hold time.
const holdSampleEvery = 8

// admit records the admission of a parked waiter whose slots drain took,
// and wakes it.
func (c *Controller) admit(w *waiter) {
	c.unpark(w)
	w.state = stateAdmitted
	c.totals.Admitted++
	w.admitted = c.now()
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

// release returns the slots of path and lets waiters on those gates in.
func (c *Controller) release(path []*gate, start int64) {
	var hold time.Duration
	if start != 0 {
		hold = time.Duration(c.nanos() - start)
	}
	queued := false
	for i, g := range path {
		c.ids[i] = g.id
		g.held--
		if start != 0 {
			g.observeHold(hold)
			g.unsampled = 0
		}
		queued = queued || g.queue.len() > 0
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
// have gained room, earliest arrival first across all of them, until every
// one of those gates is full or has nobody parked on it. The class holding
// the earliest waiter is checked: if its whole path has room its head is
// admitted, else the whole class moves, keeping its order, arrival numbers
// and deadlines, to the first full gate of its path; that gate is full, so
// nobody is left parked on a gate with room (no lost wake-up), and it stays
// full for the rest of the drain, so every class is moved at most once per
// drain, and a release moves each class parked on its gates at most once,
// however many waiters it holds (docs/ADMISSION.md, "Costs").
func (c *Controller) drain(dirty []*gate) {
	for {
		var best *gate
		for _, g := range dirty {
			if g.queue.len() == 0 || !c.hasRoom(g) {
				continue
			}
			if best == nil || g.queue.head().head.seq < best.queue.head().head.seq {
				best = g
			}
		}
		if best == nil {
			return
		}
		k := best.queue.head()
		if blocked := c.tryTake(k.path[:k.n]); blocked >= 0 {
			c.move(k, k.path[blocked])
			continue
		}
		c.admit(k.head)
	}
}
