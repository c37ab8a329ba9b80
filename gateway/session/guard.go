package session

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Runaway guards (DESIGN.md, "Runaway guards"): what one replica knows of
// the sessions it served lately, and the limits it holds them to — their
// requests in flight (a wait like a key cap), their spend (reserved before
// dispatch), their loops (one fingerprint too often within a window) and an
// operator's stop. A session caught by a guard, or stopped, stays refused
// until it has been idle for the affinity TTL or an operator resumes it.

// Limits are the runaway guards of one session, as its client key (or the
// settings' defaults) sets them; 0 is none.
type Limits struct {
	// MaxConcurrent caps the session's requests in flight.
	MaxConcurrent int
	// BudgetMicros is the session's spend, in micro-dollars.
	BudgetMicros int64
	// LoopLimit is how many requests of the session may share a fingerprint
	// within LoopWindow; one more is a loop.
	LoopLimit  int
	LoopWindow time.Duration
}

// State is a session's guard state, as /sessions shows it.
type State uint8

// The states of a session.
const (
	StateOK State = iota
	StateLooping
	StateOverBudget
	StateStopped
)

// String is the state's name on the dashboard and in the API.
func (s State) String() string {
	switch s {
	case StateLooping:
		return "looping"
	case StateOverBudget:
		return "over budget"
	case StateStopped:
		return "stopped"
	}
	return "ok"
}

// Outcome is what Enter made of a request.
type Outcome uint8

// Enter's outcomes other than OK name why the request is refused.
const (
	OK         Outcome = iota
	Stopped            // an operator stopped the session
	Looping            // the session is caught in a loop
	OverBudget         // the session's spend is used up
	Timeout            // no slot of the session's cap within the wait bound
	Gone               // the client left while waiting
)

// Reason is the outcome's label in gatehouse_session_guard_total.
func (o Outcome) Reason() string {
	switch o {
	case Stopped:
		return "stopped"
	case Looping:
		return "loop"
	case OverBudget:
		return "budget"
	case Timeout:
		return "concurrency"
	}
	return ""
}

// ActiveWindow is how long a session stays listed after its last request.
const ActiveWindow = 15 * time.Minute

// MaxSessions bounds the sessions a Guard keeps; past it, idle ones are
// forgotten first.
const MaxSessions = 100_000

// maxPrints bounds the fingerprints a session keeps within its loop window
// (16 bytes each): a loop repeats within far fewer turns.
const maxPrints = 512

// Guard keeps the sessions of one replica. The zero value is not usable:
// NewGuard.
type Guard struct {
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]*Entry
	sweptAt  time.Time
}

// NewGuard returns a Guard on clock now (nil: time.Now).
func NewGuard(now func() time.Time) *Guard {
	if now == nil {
		now = time.Now
	}
	return &Guard{now: now, sessions: make(map[string]*Entry)}
}

// Entry is one session. Its fields are guarded by the Guard's mutex.
type Entry struct {
	g                   *Guard
	hash, keyID, keyNm  string
	client              string
	first, last         time.Time
	requests, inFlight  int64
	tokensIn, tokensOut int64
	cached, cost        int64
	state               State
	// cap is the latest MaxConcurrent a request of the session brought;
	// waiters wait for a slot under it, first come first served.
	cap     int
	waiters []*waiter
	// spent and reserved are the session's spend and the estimates of its
	// attempts in flight, in micro-dollars.
	spent, reserved int64
	prints          []stamp
	connection      string
	// sharedStop: the stop came from another replica (Request.Stopped).
	sharedStop bool
}

type waiter struct {
	ch      chan struct{}
	granted bool
}

type stamp struct {
	at int64 // unix nanoseconds
	fp uint64
}

// Request is one request at the guard.
type Request struct {
	KeyID, KeyName string
	// Session is the session's stored form (Hash).
	Session string
	// Client is the product of the User-Agent (Product).
	Client string
	Limits Limits
	// Print is the request's loop fingerprint, HasPrint whether it has one.
	Print    uint64
	HasPrint bool
	// MaxWait bounds the wait for a slot under Limits.MaxConcurrent.
	MaxWait time.Duration
	// TTL is the affinity TTL: a session idle this long is released from
	// a guard's hold and its spend and loop count start over.
	TTL time.Duration
	// SharedKnown says the replicas' shared stops were read (cluster mode);
	// Stopped whether they name the session.
	SharedKnown, Stopped bool
}

// Enter admits a request of a session, or says why not. When it returns
// OK the caller holds one of the session's slots and must Leave the entry
// once; waited is how long it waited for the slot.
func (g *Guard) Enter(ctx context.Context, r *Request) (e *Entry, o Outcome, waited time.Duration) {
	now := g.now()
	g.mu.Lock()
	if now.Sub(g.sweptAt) >= time.Minute || len(g.sessions) >= MaxSessions {
		g.sweep(now, r.TTL)
	}
	e = g.sessions[r.Session]
	if e == nil {
		e = &Entry{g: g, hash: r.Session, keyID: r.KeyID, first: now}
		g.sessions[r.Session] = e
	}
	if e.idle(now, r.TTL) {
		e.reset()
	}
	e.keyNm, e.client, e.last = r.KeyName, r.Client, now
	e.requests++
	e.cap = r.Limits.MaxConcurrent
	if r.SharedKnown {
		switch {
		case r.Stopped && e.state == StateOK:
			e.state, e.sharedStop = StateStopped, true
		case !r.Stopped && e.sharedStop && e.state == StateStopped:
			e.state, e.sharedStop = StateOK, false // resumed on another replica
		}
	}
	switch e.state {
	case StateStopped:
		g.mu.Unlock()
		return e, Stopped, 0
	case StateLooping:
		g.mu.Unlock()
		return e, Looping, 0
	case StateOverBudget:
		g.mu.Unlock()
		return e, OverBudget, 0
	}
	if r.Limits.LoopLimit > 0 && r.HasPrint && e.looping(now, r) {
		e.state = StateLooping
		g.mu.Unlock()
		return e, Looping, 0
	}
	if e.cap <= 0 || e.inFlight < int64(e.cap) {
		e.inFlight++
		g.mu.Unlock()
		return e, OK, 0
	}
	w := &waiter{ch: make(chan struct{})}
	e.waiters = append(e.waiters, w)
	g.mu.Unlock()
	o, waited = g.wait(ctx, e, w, r.MaxWait)
	return e, o, waited
}

// wait waits for w's slot; the outcome is OK, Timeout or Gone.
func (g *Guard) wait(ctx context.Context, e *Entry, w *waiter, maxWait time.Duration) (Outcome, time.Duration) {
	start := time.Now()
	var timeout <-chan time.Time
	if maxWait > 0 {
		t := time.NewTimer(maxWait)
		defer t.Stop()
		timeout = t.C
	}
	o := OK
	select {
	case <-w.ch:
	case <-timeout:
		o = Timeout
	case <-ctx.Done():
		o = Gone
	}
	waited := time.Since(start)
	if o == OK {
		return o, waited
	}
	g.mu.Lock()
	if w.granted {
		// The slot came as the wait ended: give it on.
		g.mu.Unlock()
		e.Leave()
		return o, waited
	}
	if i := slices.Index(e.waiters, w); i >= 0 {
		e.waiters = slices.Delete(e.waiters, i, i+1)
	}
	g.mu.Unlock()
	return o, waited
}

// looping counts r's fingerprint among the session's within the window and
// keeps it; true when it is in more than LoopLimit requests with r. g.mu
// is held.
func (e *Entry) looping(now time.Time, r *Request) bool {
	from := now.Add(-r.Limits.LoopWindow).UnixNano()
	drop := 0
	for drop < len(e.prints) && e.prints[drop].at < from {
		drop++
	}
	if len(e.prints) >= maxPrints {
		drop = max(drop, 1)
	}
	if drop > 0 {
		e.prints = slices.Delete(e.prints, 0, drop)
	}
	n := 0
	for _, p := range e.prints {
		if p.fp == r.Print {
			n++
		}
	}
	if n >= r.Limits.LoopLimit {
		return true
	}
	e.prints = append(e.prints, stamp{at: now.UnixNano(), fp: r.Print})
	return false
}

// idle reports whether the session has had no request for ttl and has none
// in flight. g.mu is held.
func (e *Entry) idle(now time.Time, ttl time.Duration) bool {
	return ttl > 0 && e.inFlight == 0 && len(e.waiters) == 0 && now.Sub(e.last) >= ttl
}

// reset starts the session over: no hold, no spend, no fingerprints.
func (e *Entry) reset() {
	e.state, e.spent, e.prints, e.sharedStop = StateOK, 0, nil, false
}

// Leave gives back the slot Enter granted: to the first waiter, if any
// (which then holds it), or to the session.
func (e *Entry) Leave() {
	g := e.g
	g.mu.Lock()
	e.last = g.now()
	e.inFlight--
	for len(e.waiters) > 0 && (e.cap <= 0 || e.inFlight < int64(e.cap)) {
		w := e.waiters[0]
		e.waiters = slices.Delete(e.waiters, 0, 1)
		w.granted = true
		e.inFlight++
		close(w.ch)
	}
	g.mu.Unlock()
}

// Reserve holds an attempt's estimated cost against the session's budget
// (micro-dollars): false, and the session over budget from now on, when
// what it spent and holds leaves too little for it.
func (e *Entry) Reserve(cost, budget int64) bool {
	g := e.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if e.state == StateOverBudget || e.spent+e.reserved+cost > budget {
		e.state = StateOverBudget
		return false
	}
	e.reserved += cost
	return true
}

// Hold adds a reservation that the shared count (cluster mode) admitted.
func (e *Entry) Hold(cost int64) {
	e.g.mu.Lock()
	e.reserved += cost
	e.g.mu.Unlock()
}

// MarkOverBudget holds the session over budget: the shared count refused
// it.
func (e *Entry) MarkOverBudget() {
	e.g.mu.Lock()
	e.state = StateOverBudget
	e.g.mu.Unlock()
}

// Settle replaces a reservation of reserved micro-dollars by what the
// attempt cost: actual when known, else the whole reservation stays spent.
func (e *Entry) Settle(reserved, actual int64, known bool) {
	g := e.g
	g.mu.Lock()
	e.reserved -= reserved
	if known {
		e.spent += actual
	} else {
		e.spent += reserved
	}
	g.mu.Unlock()
}

// Account adds a finished request's tokens and cost to the session's
// figures, and the connection that served it.
func (e *Entry) Account(in, out, cached, cost int64, connection string) {
	g := e.g
	g.mu.Lock()
	e.tokensIn += in
	e.tokensOut += out
	e.cached += cached
	e.cost += cost
	if connection != "" {
		e.connection = connection
	}
	g.mu.Unlock()
}
