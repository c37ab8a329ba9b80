package cluster

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// coalescer sends the script calls that requests make at the same moment
// (admit.lua, release transactions) to Redis together: one pipeline, so one write
// and one read for all of them, instead of a write, a read and a scheduler
// wake-up each. Each call is still its own script invocation, with its own
// reply; only the transport is shared.
//
// There is no goroutine of its own. The caller that finds no pipeline in
// flight leads: it sends every call queued so far (its own first) and, once
// the replies are in, hands the lead to the first call queued meanwhile, so
// one pipeline is in flight at a time and a caller never leads more than
// one. A caller that finds a pipeline in flight queues and waits for its
// reply (or for the lead).
//
// A call queued with a finisher (runTxSoon: a release) is not waited for:
// its caller returns at once, and whoever sends it runs the finisher with
// the replies in. When such a call would lead, a goroutine of its own does,
// for that pipeline only, unless the call is lazy: then it waits in the
// queue for the next caller to lead, or for the timer (lazyWait), whichever
// comes first. Calls still go to Redis in the order they were queued, so a
// release queued before an admit of this replica is applied before it.
//
// While calls come together (the last pipeline carried more than one), a
// caller about to lead yields the processor once first: handlers already
// runnable make their calls into its pipeline instead of the next one, so
// fewer pipelines carry the same calls.
type coalescer struct {
	rdb     redis.UniversalClient
	base    context.Context
	timeout time.Duration
	// txPipe sends the transactions of a batch; only the leader uses it
	// (one at a time), so it is made once and reused.
	txPipe redis.Pipeliner

	mu    sync.Mutex
	busy  bool    // a leader is sending or about to
	queue []*call // calls not sent yet, in arrival order
	spare []*call // the previous batch's backing array, reused
	// lazy counts the queued calls that may wait up to lazyWait for a
	// pipeline to ride in (runTxSoon with lazy set); armed is set while
	// timer runs to send them if no call leads one before.
	lazy     int
	armed    bool
	timer    *time.Timer
	lazyWait time.Duration
	eager    bool // flushed for Close: no call waits any more
	lazied   int  // calls queued lazy so far (tests)
	// crowded is set when the last pipeline carried more than one call:
	// calls are being made at the same time, and a leader yields once
	// before sending (do).
	crowded bool
}

// lazyWait bounds how long a lazy release waits in the queue for a pipeline
// that another call leads: then the timer leads one for it.
const lazyWait = time.Millisecond

// maxBatch bounds one pipeline; calls beyond it go in the next.
const maxBatch = 128

// call is one script invocation through the coalescer, or one transaction
// of plain commands (tx: typed go-redis commands that get their replies in
// place, so no reply is parsed into generic values).
type call struct {
	script *redis.Script
	keys   []string
	args   []any
	tx     []redis.Cmder
	cmd    *redis.Cmd
	done   chan bool // true: lead the next pipeline; false: the reply is in
	// fin, when set, is run by the sender once the replies are in; nobody
	// waits on done.
	fin finisher
	// lazy: fin is set and the call may wait up to lazyWait to be sent.
	lazy bool
}

// finisher reads the replies of a call nobody waits for (runTxSoon).
type finisher interface {
	finish()
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan bool, 1)} }}

func newCoalescer(rdb redis.UniversalClient, base context.Context, timeout time.Duration) *coalescer {
	p := &coalescer{rdb: rdb, base: base, timeout: timeout, lazyWait: lazyWait}
	p.timer = time.AfterFunc(time.Hour, p.fire)
	p.timer.Stop()
	if _, ok := rdb.(*redis.Client); ok {
		p.txPipe = rdb.TxPipeline()
	}
	return p
}

// run invokes script with keys and args, coalesced with the calls made at
// the same time, and returns its reply. It takes no context: every pipeline
// is bounded by the controller's OpTimeout, as a direct call is.
func (p *coalescer) run(script *redis.Script, keys []string, args []any) *redis.Cmd {
	cl := callPool.Get().(*call)
	cl.script, cl.keys, cl.args = script, keys, args
	return p.do(cl)
}

// runTx sends cmds as one MULTI/EXEC transaction, coalesced with the calls
// made at the same time, and returns the first error among their replies
// (each command holds its own reply). The transactions of one batch go as
// one MULTI/EXEC: running them back to back, atomically together, is one of
// the orders in which they could have run anyway, and each still runs
// atomically. Only for a client that sends a pipeline to one server
// (*redis.Client): a Redis Cluster client would route MULTI and EXEC apart
// from the keys.
func (p *coalescer) runTx(cmds []redis.Cmder) error {
	cl := callPool.Get().(*call)
	cl.tx = cmds
	p.do(cl)
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// runTxSoon queues cmds as runTx does and returns at once; fin.finish runs
// once their replies are in (each command holds its own), on the goroutine
// that sent them.
func (p *coalescer) runTxSoon(cmds []redis.Cmder, fin finisher, lazy bool) {
	cl := callPool.Get().(*call)
	cl.tx, cl.fin = cmds, fin
	p.mu.Lock()
	cl.lazy = lazy && !p.eager
	lazy = cl.lazy
	p.queue = append(p.queue, cl)
	if lazy {
		p.lazy++
		p.lazied++
	}
	if p.busy {
		p.mu.Unlock()
		return
	}
	if p.lazy == len(p.queue) {
		p.arm()
		p.mu.Unlock()
		return
	}
	p.busy = true
	p.mu.Unlock()
	go p.lead(nil)
}

// arm starts the timer that sends the lazy calls queued if no other call
// leads a pipeline first. With p.mu held.
func (p *coalescer) arm() {
	if !p.armed {
		p.armed = true
		p.timer.Reset(p.lazyWait)
	}
}

// fire is the timer's: it leads a pipeline for the lazy calls still queued,
// unless a leader is at work (it takes them).
func (p *coalescer) fire() {
	p.mu.Lock()
	p.armed = false
	p.flushLocked()
}

// flush sends the lazy calls queued now, without waiting for the timer,
// unless a leader is at work (it takes them); from then on no call waits
// (Close).
func (p *coalescer) flush() {
	p.mu.Lock()
	p.eager = true
	p.timer.Stop()
	p.armed = false
	p.flushLocked()
}

// flushLocked is fire's and flush's: it is called with p.mu held and
// unlocks it.
func (p *coalescer) flushLocked() {
	if p.busy || len(p.queue) == 0 {
		p.mu.Unlock()
		return
	}
	p.busy = true
	p.mu.Unlock()
	p.lead(nil)
}

func (p *coalescer) do(cl *call) *redis.Cmd {
	p.mu.Lock()
	p.queue = append(p.queue, cl)
	lead := !p.busy
	p.busy = true
	crowded := p.crowded
	p.mu.Unlock()
	if !lead {
		lead = <-cl.done
	}
	if lead {
		if crowded {
			// Yield once before sending: handlers already runnable, about
			// to make calls of their own, queue behind this one and go in
			// the same pipeline instead of the next. Only while calls come
			// together: the yield wakes an idle processor, a cost a lone
			// caller would pay for nothing.
			runtime.Gosched()
		}
		p.lead(cl)
	}
	cmd := cl.cmd
	*cl = call{done: cl.done}
	callPool.Put(cl)
	return cmd
}

// lead sends the queued calls as one pipeline, hands each its reply, and
// passes the lead on to the first call queued meanwhile, if any: to its
// caller, or to a goroutine of its own for a call nobody waits for.
func (p *coalescer) lead(own *call) {
	p.mu.Lock()
	n := min(len(p.queue), maxBatch)
	batch := p.queue[:n:n]
	rest := p.queue[n:]
	p.queue = append(p.spare[:0], rest...)
	p.spare = nil
	p.crowded = n > 1
	for _, cl := range batch {
		if cl.lazy {
			p.lazy--
		}
	}
	p.mu.Unlock()

	p.exec(batch)

	// The leader's own call (own) is in the batch, behind any lazy calls
	// queued before it: its caller reads the reply on return.
	for _, cl := range batch {
		switch {
		case cl.fin != nil:
			cl.fin.finish()
			*cl = call{done: cl.done}
			callPool.Put(cl)
		case cl != own:
			cl.done <- false
		}
	}
	clear(batch)
	p.mu.Lock()
	p.spare = batch[:0]
	var next *call
	switch {
	case len(p.queue) == 0:
		p.busy = false
	case p.lazy == len(p.queue) && !p.eager:
		p.busy = false
		p.arm()
	default:
		next = p.queue[0]
	}
	p.mu.Unlock()
	switch {
	case next == nil:
	case next.fin != nil:
		go p.lead(nil)
	default:
		next.done <- true
	}
}

// exec sends batch: its transactions as one MULTI/EXEC and its script calls
// as one pipeline (two round trips only when a batch has both, which happens
// only while the admit transaction waits for the first heartbeat). A script
// Redis does not know (after a restart) is sent again in full, on its own.
func (p *coalescer) exec(batch []*call) {
	ctx, cancel := context.WithTimeout(p.base, p.timeout)
	defer cancel()
	scripts := 0
	for _, cl := range batch {
		if cl.script != nil {
			scripts++
			continue
		}
		_ = p.txPipe.BatchProcess(ctx, cl.tx...)
	}
	if scripts < len(batch) {
		_, _ = p.txPipe.Exec(ctx) // each command's error is in it
		if len(batch)-scripts > 1 && aborted(batch) {
			p.execApart(ctx, batch)
		}
	}
	switch scripts {
	case 0:
		return
	case 1:
		for _, cl := range batch {
			if cl.script != nil {
				cl.cmd = cl.script.Run(ctx, p.rdb, cl.keys, cl.args...)
			}
		}
		return
	}
	pipe := p.rdb.Pipeline()
	for _, cl := range batch {
		if cl.script != nil {
			cl.cmd = cl.script.EvalSha(ctx, pipe, cl.keys, cl.args...)
		}
	}
	_, _ = pipe.Exec(ctx) // each call's error is in its cmd
	for _, cl := range batch {
		if cl.script != nil && cl.cmd.Err() != nil && redis.HasErrorPrefix(cl.cmd.Err(), "NOSCRIPT") {
			cl.cmd = cl.script.Run(ctx, p.rdb, cl.keys, cl.args...)
		}
	}
}

// aborted reports whether the batch's MULTI/EXEC was discarded (EXECABORT):
// a command refused when queued (an OOM write under maxmemory, say) aborts
// the whole transaction, so the other calls' commands did not run either.
func aborted(batch []*call) bool {
	for _, cl := range batch {
		for _, c := range cl.tx {
			// Err first: HasErrorPrefix allocates even for a nil error.
			if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "EXECABORT") {
				return true
			}
		}
	}
	return false
}

// execApart sends each transaction of batch again as a MULTI/EXEC of its
// own, after its batch was discarded: one call's refused command must not
// fail the others (a release's ZREM runs under maxmemory, an admit's ZADD
// does not). Only after an EXECABORT, when nothing of the batch ran.
func (p *coalescer) execApart(ctx context.Context, batch []*call) {
	for _, cl := range batch {
		if cl.script != nil {
			continue
		}
		for _, c := range cl.tx {
			c.SetErr(nil)
		}
		_ = p.txPipe.BatchProcess(ctx, cl.tx...)
		_, _ = p.txPipe.Exec(ctx)
	}
}
