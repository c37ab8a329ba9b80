package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// Shared limits (cluster mode; docs/ARCHITECTURE.md, "Cluster mode"): with
// Options.SharedLimits set, the rpm/minTime dispatch spacing, the tpm window,
// upstream cooldowns (429, rate-limit headers) and suspensions (401/403) are kept in a store every
// replica sees, on the store's clock. The in-process state is still kept
// alongside and takes over whenever the store fails (fail-open).

// sharedCacheFor is how long a replica trusts its copy of a connection's
// shared state (cooldowns, suspension, tpm window) before reading it again.
const sharedCacheFor = 250 * time.Millisecond

// sharedRetry is how long the gateway keeps to its in-process limits after
// the shared store failed, before it asks the store again.
const sharedRetry = time.Second

// sharedConn is a replica's cached copy of one connection's shared state.
// It lives in connRate, so it outlives config snapshots.
type sharedConn struct {
	fetch sync.Mutex // one reader of the store at a time per connection

	mu          sync.Mutex
	fetchedAt   time.Time // real clock; zero: nothing cached
	suspendedAt time.Time // local (Options.Now) instants the view translates to
	cooling     map[string]time.Time
	connCoolAt  time.Time // every model cools until then (rate-limit headers)
	tpmUsed     int64
	windowEnd   time.Time

	// nextTurn is this replica's latest idea of when the connection's next
	// dispatch turn is free (unix nanos, real clock), to prefer free ones.
	nextTurn atomic.Int64
}

// sharedLimiter is the limiter of cluster mode: the store first, the
// in-process limits (local) as they are kept alongside, and the local
// limits alone while the store is down.
type sharedLimiter struct {
	local localLimiter
	store admission.SharedLimits
	learn *learner // adopts the learned caps the other replicas share
	down  *failOpen
	now   func() time.Time // Options.Now: the store's durations become these instants
}

// state returns c's shared state, read from the store when the cached copy
// is older than sharedCacheFor; ok is false when there is none to go by
// (store away). The caller must not modify the result's map.
func (l *sharedLimiter) state(ctx context.Context, c *conn) (s *sharedConn, ok bool) {
	return l.stateOf(ctx, c.id, c.rate, c.lim.tpm, true)
}

// stateOf is state for the rate state r kept in the store under id, with
// tpm limit tpm; adopt takes the learned caps the view carries
// (connections only).
func (l *sharedLimiter) stateOf(ctx context.Context, id string, r *connRate, tpm int64, adopt bool) (s *sharedConn, ok bool) {
	s = &r.shared
	s.mu.Lock()
	fresh := !s.fetchedAt.IsZero() && time.Since(s.fetchedAt) < sharedCacheFor
	s.mu.Unlock()
	if fresh {
		return s, true
	}
	if !l.down.up() {
		return s, false
	}
	s.fetch.Lock()
	defer s.fetch.Unlock()
	s.mu.Lock()
	fresh = !s.fetchedAt.IsZero() && time.Since(s.fetchedAt) < sharedCacheFor
	s.mu.Unlock()
	if fresh {
		return s, true // another request read it meanwhile
	}
	v, err := l.store.View(ctx, id, tpm)
	if err != nil {
		if ctx.Err() == nil {
			l.down.failed(err)
		}
		return s, false
	}
	now := l.now()
	s.mu.Lock()
	s.fetchedAt = time.Now()
	s.suspendedAt = time.Time{}
	if v.Suspended > 0 {
		s.suspendedAt = now.Add(v.Suspended)
	}
	s.connCoolAt = time.Time{}
	if v.ConnCooling > 0 {
		s.connCoolAt = now.Add(v.ConnCooling)
	}
	s.cooling = make(map[string]time.Time, len(v.Cooling))
	for m, d := range v.Cooling {
		s.cooling[m] = now.Add(d)
	}
	s.tpmUsed = v.TPMUsed
	s.windowEnd = now.Add(v.TPMWindowLeft)
	s.mu.Unlock()
	if adopt {
		l.learn.adoptShared(id, v.Learned)
	}
	return s, true
}

// check is c's own health, then whether model on c is suspended or cooling
// according to the store.
func (l *sharedLimiter) check(ctx context.Context, c *conn, model string, now time.Time) (unavailable, time.Time) {
	if why, until := l.local.check(ctx, c, model, now); why != availableNow {
		return why, until
	}
	s, ok := l.state(ctx, c)
	if !ok {
		return availableNow, time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.suspendedAt) {
		return unavailSuspended, s.suspendedAt
	}
	var cool time.Time
	if until, ok := s.cooling[model]; ok && now.Before(until) {
		cool = until
	}
	if now.Before(s.connCoolAt) && s.connCoolAt.After(cool) {
		cool = s.connCoolAt
	}
	if !cool.IsZero() {
		return unavailCooling, cool
	}
	return availableNow, time.Time{}
}

// tpm returns the shared tpm window of c, with this replica's estimates of
// requests in flight added: used tokens and when the window ends. ok is
// false when the store is away.
func (l *sharedLimiter) tpm(ctx context.Context, id string, r *connRate, tpm int64, adopt bool) (used int64, windowEnd time.Time, ok bool) {
	s, ok := l.stateOf(ctx, id, r, tpm, adopt)
	if !ok {
		return 0, time.Time{}, false
	}
	s.mu.Lock()
	used, windowEnd = s.tpmUsed, s.windowEnd
	s.mu.Unlock()
	r.mu.Lock()
	used += r.inflight
	r.mu.Unlock()
	return used, windowEnd, true
}

// blocked checks the tpm window in the store, when c has one; the daily
// budgets are checked in memory as always (they are exact through the
// UsageCounter).
func (l *sharedLimiter) blocked(ctx context.Context, c *conn, now time.Time) (rateBlock, bool) {
	return l.blockedOf(ctx, c.id, &c.lim, c.rate, now, true)
}

// keyBlocked is blocked for a client key's tpm window and tpd budget.
func (l *sharedLimiter) keyBlocked(ctx context.Context, ks *keyState, now time.Time) (rateBlock, bool) {
	return l.blockedOf(ctx, ks.storeID, &ks.lim, &ks.carry.rate, now, false)
}

// blockedOf is blocked for the limits lim and rate state r kept in the
// store under id.
func (l *sharedLimiter) blockedOf(ctx context.Context, id string, lim *connLimits, r *connRate, now time.Time, adopt bool) (rateBlock, bool) {
	if lim.tpm == 0 {
		return r.blocked(lim, now)
	}
	r.mu.Lock()
	r.rolloverLocked(lim, now)
	b, day := r.dayBlockedLocked(lim)
	est := r.est
	r.mu.Unlock()
	if day {
		return b, true
	}
	used, end, ok := l.tpm(ctx, id, r, lim.tpm, adopt)
	if !ok {
		return r.blocked(lim, now)
	}
	return tpmBlocked(lim, used, est, end)
}

// turnDelay is this replica's latest idea of the time to the next free
// shared turn, or the in-process one while the store is down.
func (l *sharedLimiter) turnDelay(c *conn, now time.Time) time.Duration {
	if !l.down.up() {
		return l.local.turnDelay(c, now)
	}
	return max(time.Duration(c.rate.shared.nextTurn.Load()-now.UnixNano()), 0)
}

// takeTurn reserves the turn in the store; the in-process spacing decides
// when the store is down or fails. A turn is not given back when the
// client leaves while waiting for it (the store cannot tell whether later
// turns were reserved after it).
func (l *sharedLimiter) takeTurn(x *exchange, c *conn, start time.Time, maxWait time.Duration) *apiError {
	if !l.down.up() {
		return l.local.takeTurn(x, c, start, maxWait)
	}
	t, ok, aerr := l.reserve(x, c.id, c.lim.spacing, start, maxWait)
	switch {
	case aerr != nil:
		return aerr
	case !ok:
		return l.local.takeTurn(x, c, start, maxWait)
	case !t.reserved:
		c.rate.shared.nextTurn.Store(t.now.Add(t.wait).UnixNano())
		return x.errTurnTooLate(c, t.wait, maxWait, " across all replicas")
	}
	c.rate.shared.nextTurn.Store(t.now.Add(t.wait + c.lim.spacing).UnixNano())
	return t.await(x)
}

// keyTurn reserves client key ks's rpm turn in the store, as takeTurn does
// a connection's; the in-process spacing decides when the store is down or
// fails.
func (l *sharedLimiter) keyTurn(x *exchange, ks *keyState, start time.Time, maxWait time.Duration) *apiError {
	if !l.down.up() || ks.lim.spacing <= 0 {
		return l.local.keyTurn(x, ks, start, maxWait)
	}
	t, ok, aerr := l.reserve(x, ks.storeID, ks.lim.spacing, start, maxWait)
	switch {
	case aerr != nil:
		return aerr
	case !ok:
		return l.local.keyTurn(x, ks, start, maxWait)
	case !t.reserved:
		return x.errKeyTurnTooLate(ks, t.wait, maxWait, " across all replicas")
	}
	return t.await(x)
}

// sharedTurn is the store's answer to a turn reservation made at now: wait
// until the turn (reserved), or how far away it is (not reserved: beyond
// the budget).
type sharedTurn struct {
	now      time.Time
	wait     time.Duration
	reserved bool
}

// reserve asks the store for the next turn of id, spaced by spacing, within
// what is left of maxWait since start. ok is false when the store failed
// (marked down; the caller decides in-process); aerr is set when the client
// left meanwhile.
func (l *sharedLimiter) reserve(x *exchange, id string, spacing time.Duration, start time.Time, maxWait time.Duration) (t sharedTurn, ok bool, aerr *apiError) {
	budget := time.Duration(-1)
	t.now = time.Now()
	if maxWait > 0 {
		budget = max(start.Add(maxWait).Sub(t.now), 0)
	}
	var err error
	t.wait, t.reserved, err = l.store.ReserveTurn(x.r.Context(), id, spacing, budget)
	if err != nil {
		if x.r.Context().Err() != nil {
			return t, false, errClientGone
		}
		l.down.failed(err)
		return t, false, nil
	}
	return t, true, nil
}

// await waits for the reserved turn; errClientGone if the client leaves first.
func (t sharedTurn) await(x *exchange) *apiError {
	if t.wait > 0 && !x.waitTurn(t.now, t.wait) {
		return errClientGone
	}
	return nil
}

// addTokens charges tokens to c's shared tpm window and to the cached
// copy, so this replica sees its own charge at once.
func (l *sharedLimiter) addTokens(ctx context.Context, c *conn, tokens int64) {
	l.addTokensOf(ctx, c.id, c.rate, c.lim.tpm, tokens)
}

// addKeyTokens is addTokens for a client key's tpm window.
func (l *sharedLimiter) addKeyTokens(ctx context.Context, ks *keyState, tokens int64) {
	l.addTokensOf(ctx, ks.storeID, &ks.carry.rate, ks.lim.tpm, tokens)
}

func (l *sharedLimiter) addTokensOf(ctx context.Context, id string, r *connRate, tpm, tokens int64) {
	if tokens <= 0 || !l.down.up() {
		return
	}
	s := &r.shared
	s.mu.Lock()
	s.tpmUsed += tokens
	s.mu.Unlock()
	// The tokens were spent even if the client has gone.
	if err := l.store.AddTokens(context.WithoutCancel(ctx), id, tpm, tokens); err != nil {
		l.down.failed(err)
	}
}

// coolDown also tells the other replicas that model on c cools until the
// cooldown set here ends.
func (l *sharedLimiter) coolDown(ctx context.Context, c *conn, model string, now time.Time, retryAfter time.Duration, reason string) {
	until := c.health.coolDown(model, now, retryAfter, reason)
	d := until.Sub(now)
	if d <= 0 || !l.down.up() {
		return
	}
	if err := l.store.CoolDown(context.WithoutCancel(ctx), c.id, model, d); err != nil {
		l.down.failed(err)
	}
}

// coolConnection also tells the other replicas that every model on c cools
// for d.
func (l *sharedLimiter) coolConnection(ctx context.Context, c *conn, now time.Time, d time.Duration, reason string) {
	l.local.coolConnection(ctx, c, now, d, reason)
	if d <= 0 || !l.down.up() {
		return
	}
	if err := l.store.CoolConnection(context.WithoutCancel(ctx), c.id, d); err != nil {
		l.down.failed(err)
	}
}

// suspend also tells the other replicas that c is suspended for d.
func (l *sharedLimiter) suspend(ctx context.Context, c *conn, now time.Time, d time.Duration, reason string) {
	l.local.suspend(ctx, c, now, d, reason)
	if d <= 0 || !l.down.up() {
		return
	}
	if err := l.store.Suspend(context.WithoutCancel(ctx), c.id, d); err != nil {
		l.down.failed(err)
	}
}

// reset clears connID's shared cooldowns and suspension and this replica's
// copy of them.
func (l *sharedLimiter) reset(ctx context.Context, connID string, r *connRate) {
	if r != nil {
		r.shared.mu.Lock()
		r.shared.fetchedAt = time.Time{}
		r.shared.suspendedAt = time.Time{}
		r.shared.cooling = nil
		r.shared.connCoolAt = time.Time{}
		r.shared.mu.Unlock()
	}
	if err := l.store.Reset(ctx, connID); err != nil {
		l.down.failed(err)
	}
}

// shareCap implements capStore: the learned cap of key on connID moves from
// from to to in the store, unless another replica moved it first.
func (l *sharedLimiter) shareCap(ctx context.Context, connID, key string, from, to int) (int, bool) {
	if !l.down.up() {
		return 0, false
	}
	// The change was learned even if the client has gone.
	got, err := l.store.ShareCap(context.WithoutCancel(ctx), connID, key, from, to)
	if err != nil {
		l.down.failed(err)
		return 0, false
	}
	return got, true
}
