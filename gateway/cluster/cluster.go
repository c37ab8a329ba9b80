package cluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// FailMode says what the controller does while Redis cannot be reached.
type FailMode int

const (
	// FailOpen admits through an in-process controller with each cap
	// divided by the number of live replicas last seen (at least 1).
	FailOpen FailMode = iota
	// FailClosed rejects every request with an *UnavailableError.
	FailClosed
)

// ParseFailMode reads GATEHOUSE_CLUSTER_FAIL_MODE: "fail-open" (also the
// empty string) or "fail-closed".
func ParseFailMode(s string) (FailMode, error) {
	switch s {
	case "", live.ClusterFailOpen:
		return FailOpen, nil
	case live.ClusterFailClosed:
		return FailClosed, nil
	}
	return 0, fmt.Errorf("cluster: fail mode %q: want fail-open or fail-closed", s)
}

// String returns the mode as GATEHOUSE_CLUSTER_FAIL_MODE spells it, which is
// also how live.Cluster.Mode names it.
func (m FailMode) String() string {
	if m == FailClosed {
		return live.ClusterFailClosed
	}
	return live.ClusterFailOpen
}

// Defaults for Options.
const (
	DefaultLeaseTTL  = 15 * time.Second
	DefaultRecheck   = time.Second
	DefaultOpTimeout = time.Second
	DefaultPrefix    = "gatehouse"
)

// Options configures a Controller. Client is required.
type Options struct {
	// Client is the Redis connection; the caller owns it and closes it after
	// Close. Every key the controller uses shares the hash tag "{adm}", so
	// the scripts also run on a Redis Cluster.
	Client redis.UniversalClient
	// ReplicaID names this replica in lease owners (default: random hex).
	ReplicaID string
	// Prefix starts every key and channel (default "gatehouse"); replicas
	// that share caps must share it. It must not contain braces.
	Prefix string
	// LeaseTTL is how long a slot outlives its owner's last renewal
	// (default 15s). Leases are renewed every LeaseTTL/3.
	LeaseTTL time.Duration
	// Recheck is how often local waiters re-check without a wake-up message,
	// and how often Redis is probed while it is away (default 1s).
	Recheck time.Duration
	// OpTimeout bounds every Redis call (default 1s); a call that fails or
	// times out switches the controller to its fail mode.
	OpTimeout time.Duration
	// FailMode applies while Redis is away (default FailOpen).
	FailMode FailMode
	// DefaultHold is the hold time assumed for a gate before any release
	// has been seen, for EstimateWait and RetryAfter (default 1s).
	DefaultHold time.Duration
	// Logger receives mode switches and lost leases (default slog.Default()).
	Logger *slog.Logger
	// PriorityAging is how long a waiter waits before it moves up one
	// priority class (default admission.DefaultPriorityAging; see
	// SetPriorityAging).
	PriorityAging time.Duration
}

var _ admission.Admitter = (*Controller)(nil)

// Controller admits requests through gates whose slots live in Redis. It
// implements admission.Admitter. It is safe for concurrent use. Create it
// with New and stop it with Close.
type Controller struct {
	rdb         redis.UniversalClient
	replica     string
	ttl         time.Duration
	recheck     time.Duration
	opTimeout   time.Duration
	mode        FailMode
	defaultHold time.Duration
	log         *slog.Logger
	keys        keyspace
	ttlArg      any // ttl in ms, boxed once for script arguments
	queuedArg   any // keys.queued, boxed once for transaction arguments
	agingArg    any // the priority aging period in ms, boxed once; guarded by mu

	base    context.Context // for Redis calls; never cancelled
	stop    context.CancelFunc
	closing chan struct{}
	drained chan struct{} // closed by Drain
	wg      sync.WaitGroup
	ps      *redis.PubSub
	co      *coalescer // admit and release calls, pipelined together
	// soon counts releases queued by ReleaseSoon (and their wake-ups) that
	// are not through yet; Close waits for them.
	soon sync.WaitGroup
	// txRelease: releases are MULTI/EXEC transactions of plain commands
	// (releaseTx), for a client that pipelines to one server; through a
	// Redis Cluster client, release.lua.
	txRelease bool
	// clockOff is Redis's clock minus this replica's (ms), learned at every
	// heartbeat (clockKnown once learned), for the lease expiries that the
	// admit transaction writes without a script (admitTx).
	clockOff   atomic.Int64
	clockKnown atomic.Bool
	subSync    chan struct{} // capped gates changed: resubscribe

	down     atomic.Bool // Redis unreachable: fail mode in force
	fallback *admission.Controller

	mu         sync.Mutex
	caps       map[string]int
	gates      map[string]*gateState
	leases     map[*lease]struct{} // held permits, renewed by the heartbeat
	pending    map[*lease]struct{} // fail-open permits running outside the ledger
	orphans    []orphan            // queue entries left in Redis, for rejoin to remove
	waiters    map[*waiter]struct{}
	seq        uint64
	replicas   int // live replicas last seen, at least 1
	subscribed map[string]bool
	// clientFields caches clientField's boxed fields by client key id.
	clientFields map[string]any
	totals       admission.Totals
	lostLeases   int64
	downErr      error // why Redis was last found unreachable
	closed       bool
	draining     bool // set by Drain

	// Kept leases (keep.go): by path, oldest first; how many; how long one
	// waits to be taken over (0: none is kept) and how old the gates'
	// counts may be; the timer that gives back those that wait longer, and
	// whether it is set; how many were taken over (tests).
	kept      map[pathKey][]*lease
	nKept     atomic.Int64 // changed with c.mu held, read without it
	keepIdle  time.Duration
	keepFresh time.Duration
	keepTimer *time.Timer
	keepArmed bool
	takenOver int64
	epoch     time.Time // c.now's origin

	// queuedHook, when set (tests only), runs after Acquire's first script
	// queued a request and before the request is parked locally.
	queuedHook func()
}

// New registers the replica in Redis and starts its background work: lease
// renewal and heartbeat, wake-up messages, periodic re-checks and, while
// Redis is away, probing for its return. If Redis cannot be reached now the
// controller starts in its fail mode rather than failing. ctx bounds only
// the registration; the background work runs until Close.
func New(ctx context.Context, opts Options) (*Controller, error) {
	if opts.Client == nil {
		return nil, errors.New("cluster: Options.Client is nil")
	}
	id := opts.ReplicaID
	if id == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c := &Controller{
		rdb:          opts.Client,
		replica:      id,
		ttl:          cmp.Or(opts.LeaseTTL, DefaultLeaseTTL),
		recheck:      cmp.Or(opts.Recheck, DefaultRecheck),
		opTimeout:    cmp.Or(opts.OpTimeout, DefaultOpTimeout),
		mode:         opts.FailMode,
		defaultHold:  cmp.Or(opts.DefaultHold, time.Second),
		log:          cmp.Or(opts.Logger, slog.Default()),
		keys:         newKeyspace(cmp.Or(opts.Prefix, DefaultPrefix)),
		closing:      make(chan struct{}),
		drained:      make(chan struct{}),
		subSync:      make(chan struct{}, 1),
		fallback:     admission.New(admission.Options{DefaultHold: opts.DefaultHold, PriorityAging: opts.PriorityAging}),
		caps:         make(map[string]int),
		gates:        make(map[string]*gateState),
		leases:       make(map[*lease]struct{}),
		pending:      make(map[*lease]struct{}),
		waiters:      make(map[*waiter]struct{}),
		replicas:     1,
		subscribed:   make(map[string]bool),
		clientFields: make(map[string]any),
		kept:         make(map[pathKey][]*lease),
		keepIdle:     defaultKeepIdle,
		keepFresh:    defaultKeepFresh,
		epoch:        time.Now(),
	}
	c.keepTimer = time.AfterFunc(time.Hour, c.sweepKept)
	c.keepTimer.Stop()
	if c.ttl < 3*time.Millisecond {
		return nil, fmt.Errorf("cluster: lease TTL %s is too short", c.ttl)
	}
	c.ttlArg = c.ttl.Milliseconds()
	c.queuedArg = c.keys.queued
	c.agingArg = agingMs(opts.PriorityAging)
	c.base = context.WithoutCancel(ctx)
	c.co = newCoalescer(c.rdb, c.base, c.opTimeout)
	_, c.txRelease = c.rdb.(*redis.Client)
	if err := c.renew(ctx); err != nil {
		c.markDown(err)
	}
	loopCtx, stop := context.WithCancel(c.base)
	c.stop = stop
	c.ps = c.rdb.Subscribe(loopCtx)
	c.wg.Add(2)
	go c.maintain(loopCtx)
	go c.listen(loopCtx)
	return c, nil
}

// ReplicaID is the id this replica registered under.
func (c *Controller) ReplicaID() string { return c.replica }

// Degraded reports whether Redis is away and the fail mode is in force.
func (c *Controller) Degraded() bool { return c.down.Load() }

// Close stops the background work, ends every waiter with ErrClosed, gives
// back the leases of permits still held (their later Release does nothing)
// and unregisters the replica. Call it once, after the gateway has drained.
func (c *Controller) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	c.keepTimer.Stop()
	c.mu.Unlock()
	c.stop()
	_ = c.ps.Close()
	c.wg.Wait()
	c.co.flush()
	c.soon.Wait()

	c.mu.Lock()
	held := make([]*lease, 0, len(c.leases))
	for l := range c.leases {
		held = append(held, l)
	}
	c.mu.Unlock()
	var errs []error
	for _, l := range held {
		if err := l.release(ctx, false); err != nil {
			errs = append(errs, err)
			break
		}
	}
	if len(errs) == 0 {
		if err := c.removeOrphans(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.rdb.ZRem(ctx, c.keys.replicas, c.replica).Err(); err != nil {
		errs = append(errs, fmt.Errorf("cluster: unregister replica: %w", err))
	}
	return errors.Join(errs...)
}

// Drain ends every wait with an *admission.Error of CodeShuttingDown
// (matching admission.ErrShuttingDown), removing the waiters' queue entries
// from Redis, and makes every later Acquire fail the same way and every later
// TryAcquire report false, as admission.Controller.Drain does. Permits held
// are not touched. Call Close after the gateway has drained.
func (c *Controller) Drain() {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return
	}
	c.draining = true
	close(c.drained)
	c.mu.Unlock()
	c.fallback.Drain()
}

// errDrained is giveUp's cause for a wait ended by Drain.
var errDrained = errors.New("cluster: drained")

// op is the context of one Redis call made on the controller's behalf.
func (c *Controller) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.base, c.opTimeout)
}

// keyspace names the Redis keys and channels. The "{adm}" hash tag keeps
// them in one Redis Cluster slot, as a multi-key script requires.
type keyspace struct {
	root, replicas, queued string
	// queuedKeys is []string{queued}: the KEYS of the scripts that name
	// every other key from it.
	queuedKeys []string
}

func newKeyspace(prefix string) keyspace {
	root := prefix + ":{adm}:"
	return keyspace{root: root, replicas: root + "replicas", queued: root + "queued", queuedKeys: []string{root + "queued"}}
}

func (k keyspace) holders(gate string) string { return k.root + "h:" + gate }
func (k keyspace) queue(gate string) string   { return k.root + "q:" + gate }
func (k keyspace) expiry(gate string) string  { return k.root + "x:" + gate }
func (k keyspace) waiting(gate string) string { return k.root + "w:" + gate }
func (k keyspace) fair(gate string) string    { return k.root + "f:" + gate }
func (k keyspace) turns(gate string) string   { return k.root + "t:" + gate }
func (k keyspace) channel(gate string) string { return k.root + "free:" + gate }
func (k keyspace) channelPrefix() string      { return k.root + "free:" }
