package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Shared limits (cluster mode; gateway/cluster's doc, "Shared limits and health"): the
// rpm/minTime dispatch spacing, the tpm window, upstream cooldowns (429,
// rate-limit headers) and suspensions (401/403) are kept in a Store every
// replica sees, on the store's clock. The in-process state is still kept
// alongside and takes over whenever the store fails (fail-open).

// sharedCacheFor is how long a replica trusts its copy of a connection's
// shared state (cooldowns, suspension, tpm window) before reading it again.
const sharedCacheFor = 250 * time.Millisecond

// sharedRetry is how long a replica keeps to its in-process limits after
// the store failed, before it asks the store again.
const sharedRetry = time.Second

// sharedState is a replica's cached copy of one connection's (or key's)
// shared state. It lives in State, so it outlives config snapshots.
type sharedState struct {
	fetch sync.Mutex // one reader of the store at a time per connection

	mu          sync.Mutex
	fetchedAt   time.Time // real clock; zero: nothing cached
	suspendedAt time.Time // local (Shared.now) instants the view translates to
	cooling     map[string]time.Time
	connCoolAt  time.Time // every model cools until then (rate-limit headers)
	tpmUsed     int64
	windowEnd   time.Time

	// nextTurn is this replica's latest idea of when the next dispatch
	// turn is free (unix nanos, real clock), to prefer free ones.
	nextTurn atomic.Int64
}

// Shared keeps the limits in a Store first, the in-process State as it is
// kept alongside, and the State alone while the store is down.
type Shared struct {
	store Store
	down  *failOpen
	now   func() time.Time // the store's durations become instants of this clock
	adopt func(connID string, learned map[string]int)
}

// NewShared returns the limits kept in store. now is the gateway's clock;
// failures are logged to log at most once a minute; adopt (not nil) is
// given the learned caps each View carries.
func NewShared(store Store, now func() time.Time, log *slog.Logger, adopt func(connID string, learned map[string]int)) *Shared {
	return &Shared{store: store, now: now, adopt: adopt, down: &failOpen{log: log, retry: sharedRetry,
		msg: "gateway: shared rate-limit store unavailable; using this replica's own limits until it is back"}}
}

// state returns id's shared state, read from the store when the cached
// copy is older than sharedCacheFor; ok is false when there is none to go
// by (store away). The caller must not modify the result's map.
func (l *Shared) state(ctx context.Context, id string, r *State, tpm int64) (s *sharedState, ok bool) {
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
	if len(v.Learned) > 0 {
		l.adopt(id, v.Learned)
	}
	return s, true
}

// Unavailable reports whether model on connection id is suspended or
// cooling according to the store: until when (zero: it is not), and
// whether that is a suspension. r is the connection's state, tpm its limit.
func (l *Shared) Unavailable(ctx context.Context, id string, r *State, tpm int64, model string, now time.Time) (until time.Time, suspended bool) {
	s, ok := l.state(ctx, id, r, tpm)
	if !ok {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Before(s.suspendedAt) {
		return s.suspendedAt, true
	}
	if c, ok := s.cooling[model]; ok && now.Before(c) {
		until = c
	}
	if now.Before(s.connCoolAt) && s.connCoolAt.After(until) {
		until = s.connCoolAt
	}
	return until, false
}

// Blocked checks the tpm window in the store, when l has one; the daily
// budgets are checked in memory as always (they are exact through the
// UsageCounter). The store's window holds the reservations of every
// replica's requests in flight.
func (l *Shared) Blocked(ctx context.Context, id string, lim *Limits, r *State, now time.Time) (Block, bool) {
	if lim.TPM == 0 {
		return r.Blocked(lim, now)
	}
	r.mu.Lock()
	r.rolloverLocked(lim, now)
	b, day := r.dayBlockedLocked(lim)
	est := r.est
	r.mu.Unlock()
	if day {
		return b, true
	}
	s, ok := l.state(ctx, id, r, lim.TPM)
	if !ok {
		return r.Blocked(lim, now)
	}
	s.mu.Lock()
	used, end := s.tpmUsed, s.windowEnd
	s.mu.Unlock()
	return tpmBlocked(lim, used, est, end)
}

// TurnDelay is this replica's latest idea of the time to the next free
// shared turn, or the in-process one while the store is down.
func (l *Shared) TurnDelay(r *State, now time.Time) time.Duration {
	if !l.down.up() {
		return r.TurnDelay(now)
	}
	return max(time.Duration(r.shared.nextTurn.Load()-now.UnixNano()), 0)
}

// Turn reserves id's turn in the store and waits for it; the in-process
// spacing decides when the store is down or fails. A turn taken and not
// used is given back (Turn.GiveBack) when the store can (TurnReturner), as
// is a turn whose client leaves while waiting for it.
func (l *Shared) Turn(ctx context.Context, id string, r *State, spacing time.Duration, start time.Time, maxWait time.Duration) Turn {
	if !l.down.up() || spacing <= 0 {
		return r.Turn(ctx, start, maxWait)
	}
	budget := time.Duration(-1)
	now := time.Now()
	if maxWait > 0 {
		budget = max(start.Add(maxWait).Sub(now), 0)
	}
	var (
		wait     time.Duration
		reserved bool
		token    int64
		err      error
	)
	tr, canReturn := l.store.(TurnReturner)
	if canReturn {
		wait, reserved, token, err = tr.ReserveTurnToken(ctx, id, spacing, budget)
	} else {
		wait, reserved, err = l.store.ReserveTurn(ctx, id, spacing, budget)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Turn{Verdict: TurnGone, Shared: true}
		}
		l.down.failed(err)
		return r.Turn(ctx, start, maxWait)
	}
	if !reserved {
		r.shared.nextTurn.Store(now.Add(wait).UnixNano())
		return Turn{Verdict: TurnTooLate, Wait: wait, Shared: true}
	}
	at := now.Add(wait).UnixNano()
	r.shared.nextTurn.Store(at + int64(spacing))
	t := Turn{Wait: wait, Shared: true}
	if canReturn {
		t.back = &sharedTurn{l: l, tr: tr, r: r, id: id, spacing: spacing, token: token, at: at}
	}
	if wait > 0 {
		waited, ok := waitTurn(ctx, now, wait)
		if !ok {
			t.GiveBack()
			return Turn{Verdict: TurnGone, Wait: wait, Shared: true}
		}
		t.Waited = waited
	}
	return t
}

// sharedTurn is what it takes to give a turn of the store back.
type sharedTurn struct {
	l       *Shared
	tr      TurnReturner
	r       *State
	id      string
	spacing time.Duration
	token   int64
	at      int64 // the turn's start, ns on this replica's clock
}

// giveBack returns the turn to the store, and this replica's idea of the
// next free turn to its start if no later turn was seen since. The store's
// call outlives the client (it is bounded by the store).
func (s *sharedTurn) giveBack() {
	s.r.shared.nextTurn.CompareAndSwap(s.at+int64(s.spacing), s.at)
	if !s.l.down.up() {
		return
	}
	if err := s.tr.GiveBackTurn(context.Background(), s.id, s.spacing, s.token); err != nil {
		s.l.down.failed(err)
	}
}

// CoolDown tells the other replicas that model on connID cools for d.
func (l *Shared) CoolDown(ctx context.Context, connID, model string, d time.Duration) {
	if d <= 0 || !l.down.up() {
		return
	}
	if err := l.store.CoolDown(context.WithoutCancel(ctx), connID, model, d); err != nil {
		l.down.failed(err)
	}
}

// CoolConnection tells the other replicas that every model on connID
// cools for d.
func (l *Shared) CoolConnection(ctx context.Context, connID string, d time.Duration) {
	if d <= 0 || !l.down.up() {
		return
	}
	if err := l.store.CoolConnection(context.WithoutCancel(ctx), connID, d); err != nil {
		l.down.failed(err)
	}
}

// Suspend tells the other replicas that connID is suspended for d.
func (l *Shared) Suspend(ctx context.Context, connID string, d time.Duration) {
	if d <= 0 || !l.down.up() {
		return
	}
	if err := l.store.Suspend(context.WithoutCancel(ctx), connID, d); err != nil {
		l.down.failed(err)
	}
}

// Reset clears connID's shared cooldowns and suspension and this replica's
// copy of them (r, nil when unknown).
func (l *Shared) Reset(ctx context.Context, connID string, r *State) {
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

// ShareCap moves the learned cap of key on connID from from to to in the
// store, unless another replica moved it first: the value after, and false
// when the store could not be asked.
func (l *Shared) ShareCap(ctx context.Context, connID, key string, from, to int) (int, bool) {
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
