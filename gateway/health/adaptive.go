package health

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Adaptive caps (DESIGN.md "Adaptive and shadow caps"; the package doc,
// "Adaptive caps"): on a connection with rateLimitOverrides.adaptive, the
// connection gate and each capped model gate get an effective cap between 1
// and the configured one, learned from the upstream by additive increase and
// multiplicative decrease. Admission knows only the effective cap: the
// gateway pushes it (Learner.Changed) through the same live-cap path a
// config reload uses, so lowering it cuts no running request.

// The Learner's constants, as DESIGN.md states them.
const (
	// cutNum/cutDen is the decrease factor: ⌊0.7 × cap⌋, at least 1 lower.
	cutNum, cutDen = 7, 10
	// minCutWindow is the shortest time between two cuts of one gate; the
	// gate's mean hold time is used when it is longer, so one burst of
	// rejections (the requests that were in flight together) cuts once.
	minCutWindow = time.Second
	// raiseRunPerCap: an increase needs raiseRunPerCap × effective cap
	// successful responses in a row that found the gate full.
	raiseRunPerCap = 10
	// raiseQuiet is how long after a cut no increase happens, so a limit that
	// holds is probed about once per raiseQuiet, costing one rejection.
	raiseQuiet = 10 * time.Second
	// learnLogEvery bounds the info log to one line per gate per interval.
	learnLogEvery = 10 * time.Second
	// holdAlpha weighs the newest hold time in the moving mean.
	holdAlpha = 0.1
)

// Learner keeps the effective cap of every adaptive gate. It outlives
// config snapshots: Apply reconfigures it, and a gate keeps what it learned
// for as long as it stays adaptive. Its methods are safe for concurrent use.
type Learner struct {
	now func() time.Time
	log *slog.Logger
	// Quiet is how long after a cut no increase happens (raiseQuiet; tests
	// shorten it). Set it before use.
	Quiet time.Duration
	// Changed, when set, is called without any Learner lock held after an
	// effective cap changed: the gateway pushes the caps to admission. Set
	// it before use.
	Changed func()
	// Shared, when set (cluster mode: ratelimit.Shared), holds one learned
	// value per gate for every replica. Set it before use.
	Shared CapStore

	mu    sync.Mutex
	gates map[string]*LearnedGate // by gate key
}

// NewLearner returns a Learner with no gates on the clock now, logging cap
// changes to log.
func NewLearner(now func() time.Time, log *slog.Logger) *Learner {
	return &Learner{now: now, log: log, Quiet: raiseQuiet, gates: make(map[string]*LearnedGate)}
}

// LearnedGate is one adaptive gate. inFlight and eff are read on the request
// path without a lock; the rest is guarded by mu.
type LearnedGate struct {
	key    string
	level  string
	connID string
	l      *Learner

	inFlight atomic.Int64
	eff      atomic.Int64 // the effective cap, 1…configured
	holdNs   atomic.Int64 // moving mean hold time of this gate's requests

	mu         sync.Mutex
	configured int
	lastCut    time.Time    // zero: never cut
	run        atomic.Int64 // successes in a row that found the gate full (written under mu)
	lowered    bool         // the Learner holds the cap below the configured one
	loggedAt   time.Time    // last info line
	loggedCap  int          // effective cap that line reported
}

// LearnSpec is one adaptive gate a config asks for: its connection, its
// level (live.LevelConnection or live.LevelModel) and its configured cap
// (≥ 1).
type LearnSpec struct {
	ConnID string
	Level  string
	Cap    int
}

// Configure sets the adaptive gates and their configured caps (by gate key;
// the level is the key's prefix) and returns them by key. A gate that stays
// adaptive keeps its effective cap, clamped to the configured one; one whose
// effective cap was never lowered below its configured cap follows a raised
// cap; a new gate starts at its configured cap. Gates not named are
// forgotten.
func (l *Learner) Configure(caps map[string]LearnSpec) map[string]*LearnedGate {
	l.mu.Lock()
	defer l.mu.Unlock()
	forgetMissing(l.gates, caps)
	for key, sp := range caps {
		lg := l.gates[key]
		if lg == nil {
			lg = &LearnedGate{key: key, level: sp.Level, connID: sp.ConnID, l: l}
			l.gates[key] = lg
		}
		lg.setConfigured(sp.Cap)
	}
	return maps.Clone(l.gates)
}

// forgetMissing deletes from m every key that keep does not name: the gates a
// new configuration no longer has (Learner and shadows alike).
func forgetMissing[V, W any](m map[string]V, keep map[string]W) {
	for key := range m {
		if _, ok := keep[key]; !ok {
			delete(m, key)
		}
	}
}

// Effective returns the effective cap of every adaptive gate, by key.
func (l *Learner) Effective() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.gates))
	for key, lg := range l.gates {
		out[key] = int(lg.eff.Load())
	}
	return out
}

// Gate returns the adaptive gate key, nil when there is none.
func (l *Learner) Gate(key string) *LearnedGate {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gates[key]
}

// EffectiveCap returns the effective cap of gate key and whether it is adaptive.
func (l *Learner) EffectiveCap(key string) (int, bool) {
	l.mu.Lock()
	lg := l.gates[key]
	l.mu.Unlock()
	if lg == nil {
		return 0, false
	}
	return int(lg.eff.Load()), true
}

func (lg *LearnedGate) setConfigured(c int) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	cur := int(lg.eff.Load())
	if cur == 0 || !lg.lowered || cur > c {
		// New, never lowered by the Learner (it follows the cap), or above
		// a lowered cap.
		lg.eff.Store(int64(c))
	}
	lg.configured = c
}

// enter counts a dispatched request and reports whether it found the gate
// full: with it, in-flight reached the effective cap.
func (lg *LearnedGate) enter() bool {
	return lg.inFlight.Add(1) >= lg.eff.Load()
}

// leave ends a request entered with enter that held the gate for hold.
func (lg *LearnedGate) leave(hold time.Duration) {
	lg.inFlight.Add(-1)
	for {
		old := lg.holdNs.Load()
		next := int64(hold)
		if old > 0 {
			next = old + int64(holdAlpha*float64(int64(hold)-old))
		}
		if lg.holdNs.CompareAndSwap(old, next) {
			return
		}
	}
}

// InFlight is the requests dispatched on the gate and not yet answered.
func (lg *LearnedGate) InFlight() int64 { return lg.inFlight.Load() }

// cutWindow is the shortest time between two cuts: max(1 s, mean hold time).
func (lg *LearnedGate) cutWindow() time.Duration {
	return max(minCutWindow, time.Duration(lg.holdNs.Load()))
}

// cut is the decrease after an upstream rejection at now. It reports the
// caps before and after, and whether the effective cap changed. A cut within
// cutWindow of the last one changes nothing, so one burst of rejections
// counts once; at 1 the cap stays 1 (the cut still restarts the quiet time
// before an increase).
func (lg *LearnedGate) cut(now time.Time) (from, to int, changed bool) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.run.Store(0)
	from = int(lg.eff.Load())
	if !lg.lastCut.IsZero() && now.Sub(lg.lastCut) < lg.cutWindow() {
		return from, from, false
	}
	lg.lastCut = now
	to = cutCap(from)
	lg.eff.Store(int64(to))
	lg.lowered = to < lg.configured
	return from, to, to != from
}

// cutCap is ⌊0.7 × c⌋, at least 1 lower than c, never below 1.
func cutCap(c int) int {
	return max(1, min(c-1, c*cutNum/cutDen))
}

// succeeded counts a successful response at now that found the gate full
// (or not). The row is the successes since the last rejection; only those
// that found the gate full count (one that found room proves nothing about
// the cap, and on a busy gate such gaps come and go, so it does not end the
// row either). After raiseRunPerCap × effective cap of them, and not within
// quiet of the last cut, the effective cap grows by 1, up to the configured
// cap.
func (lg *LearnedGate) succeeded(now time.Time, full bool) (from, to int, changed bool) {
	if !full {
		return 0, 0, false
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	from = int(lg.eff.Load())
	if from >= lg.configured {
		lg.run.Store(0)
		return from, from, false
	}
	run := lg.run.Add(1)
	if run < int64(raiseRunPerCap*from) || (!lg.lastCut.IsZero() && now.Sub(lg.lastCut) < lg.l.Quiet) {
		// Not yet: the row goes on, and the increase comes with the first
		// full success after the quiet time.
		return from, from, false
	}
	lg.run.Store(0)
	lg.eff.Store(int64(from + 1))
	lg.lowered = from+1 < lg.configured
	return from, from + 1, true
}

// note logs a change of the effective cap, at most once per gate per
// learnLogEvery; a change inside that time shows in the next line's "from".
func (lg *LearnedGate) note(now time.Time, to int, why string) {
	lg.mu.Lock()
	if !lg.loggedAt.IsZero() && now.Sub(lg.loggedAt) < learnLogEvery {
		lg.mu.Unlock()
		return
	}
	from := lg.loggedCap
	if lg.loggedAt.IsZero() {
		from = lg.configured
	}
	lg.loggedAt, lg.loggedCap = now, to
	configured := lg.configured
	lg.mu.Unlock()
	lg.l.log.Info("gateway: adaptive cap changed", slog.String("gate", lg.key),
		slog.Int("from", from), slog.Int("to", to), slog.Int("configured", configured), slog.String("reason", why))
}

// LearnPath is the adaptive gates on one target's path (connection first,
// then its model gate when capped); empty on a connection that is not
// adaptive.
type LearnPath []*LearnedGate

// Enter counts a dispatch on every gate of p; bit i of the result says
// whether gate i was full.
func (p LearnPath) Enter() uint8 {
	var full uint8
	for i, lg := range p {
		if lg.enter() {
			full |= 1 << i
		}
	}
	return full
}

// InFlightCounter is what a shared admission controller's grant tells
// (admission.ClusterInFlight): the requests holding a capped gate across the
// cluster right after the grant was admitted, itself included.
type InFlightCounter interface {
	InFlightAt(gateKey string) (int, bool)
}

// FullAcross adds to full (Enter's bits) the gates of p that a shared
// admission controller (cluster mode) found full when it admitted the
// request: its cluster-wide in-flight there, the request included, reached
// the effective cap. With several replicas this replica's own in-flight
// rarely does.
func (p LearnPath) FullAcross(ci InFlightCounter, full uint8) uint8 {
	for i, lg := range p {
		if n, ok := ci.InFlightAt(lg.key); ok && int64(n) >= lg.eff.Load() {
			full |= 1 << i
		}
	}
	return full
}

// Leave ends a dispatch on every gate of p, which held them since start.
func (p LearnPath) Leave(start time.Time) {
	if len(p) == 0 {
		return
	}
	hold := time.Since(start)
	for _, lg := range p {
		lg.leave(hold)
	}
}

// Succeeded counts a successful response on every gate of p.
func (p LearnPath) Succeeded(ctx context.Context, full uint8) {
	if len(p) == 0 {
		return
	}
	if full == 0 {
		return // found room everywhere: not a sample of any cap
	}
	l := p[0].l
	now := l.now()
	changed := false
	for i, lg := range p {
		if from, to, ok := lg.succeeded(now, full&(1<<i) != 0); ok {
			changed = true
			lg.note(now, to, "a run of successes at a full gate")
			l.publish(ctx, lg, from, to, now)
		}
	}
	if changed && l.Changed != nil {
		l.Changed()
	}
}

// Rejected cuts every gate of p after an upstream rejection.
func (p LearnPath) Rejected(ctx context.Context, why string) {
	if len(p) == 0 {
		return
	}
	l := p[0].l
	now := l.now()
	changed := false
	for _, lg := range p {
		if from, to, ok := lg.cut(now); ok {
			changed = true
			lg.note(now, to, why)
			l.publish(ctx, lg, from, to, now)
		}
	}
	if changed && l.Changed != nil {
		l.Changed()
	}
}

// publish tells the other replicas (cluster mode) that lg moved from from to
// to; when another replica moved the shared value first, lg adopts that.
func (l *Learner) publish(ctx context.Context, lg *LearnedGate, from, to int, now time.Time) {
	if l.Shared == nil {
		return
	}
	if got, ok := l.Shared.ShareCap(ctx, lg.connID, lg.key, from, to); ok && got != to {
		lg.adopt(got, now)
	}
}

// CapStore shares learned caps between replicas (cluster mode): ShareCap
// moves the learned cap of gate key on connID from from to to, unless
// another replica moved it first, and returns the value after, and false
// when the store could not be asked.
type CapStore interface {
	ShareCap(ctx context.Context, connID, key string, from, to int) (int, bool)
}

// AdoptShared takes the learned caps of connID's gates that the other
// replicas share (by gate key) and pushes the caps when one changed.
func (l *Learner) AdoptShared(connID string, learned map[string]int) {
	if len(learned) == 0 {
		return
	}
	now := l.now()
	changed := false
	l.mu.Lock()
	for key, c := range learned {
		if lg := l.gates[key]; lg != nil && lg.connID == connID && lg.adopt(c, now) {
			changed = true
		}
	}
	l.mu.Unlock()
	if changed && l.Changed != nil {
		l.Changed()
	}
}

// adopt takes a learned value from the other replicas, clamped to
// 1…configured, and reports whether it changed lg. A lower value is a cut
// made elsewhere: the cut window and the quiet time before an increase run
// from now here too.
func (lg *LearnedGate) adopt(c int, now time.Time) bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	c = min(max(c, 1), lg.configured)
	cur := int(lg.eff.Load())
	if c == cur {
		return false
	}
	if c < cur {
		lg.lastCut = now
	}
	lg.eff.Store(int64(c))
	lg.lowered = c < lg.configured
	lg.run.Store(0)
	return true
}
