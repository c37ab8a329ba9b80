package session

import (
	"slices"
	"strings"
	"time"
)

// What an operator sees of the guard and does with it: stop, resume, list.

// Stop holds the session stopped: its next requests are refused with
// SESSION_STOPPED (those in flight finish). It reports false when the
// guard does not know the session.
func (g *Guard) Stop(session string) (Info, bool) {
	return g.set(session, func(e *Entry) { e.state, e.sharedStop = StateStopped, false })
}

// Resume lets a stopped, looping or over-budget session go on, its spend and
// loop count starting over. It reports false when the guard does not know
// the session.
func (g *Guard) Resume(session string) (Info, bool) {
	return g.set(session, (*Entry).reset)
}

func (g *Guard) set(session string, f func(*Entry)) (Info, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.sessions[session]
	if e == nil {
		return Info{}, false
	}
	f(e)
	e.last = g.now()
	return e.info(), true
}

// Info is a session as /api/v1/sessions shows it.
type Info struct {
	Session      string    `json:"session"`
	KeyID        string    `json:"keyId"`
	KeyName      string    `json:"keyName"`
	Client       string    `json:"client"`
	Requests     int64     `json:"requests"`
	InFlight     int64     `json:"inFlight"`
	Waiting      int       `json:"waiting"`
	InputTokens  int64     `json:"inputTokens"`
	OutputTokens int64     `json:"outputTokens"`
	CachedTokens int64     `json:"cachedTokens"`
	CostMicros   int64     `json:"-"`
	SpentMicros  int64     `json:"-"`
	Connection   string    `json:"connection"`
	State        string    `json:"state"`
	FirstSeen    time.Time `json:"firstSeen"`
	LastSeen     time.Time `json:"lastSeen"`
}

// CacheHitRatio is the share of the session's input tokens read from the
// prompt cache (0 without input).
func (i Info) CacheHitRatio() float64 {
	if i.InputTokens <= 0 {
		return 0
	}
	return float64(i.CachedTokens) / float64(i.InputTokens)
}

func (e *Entry) info() Info {
	return Info{
		Session: e.hash, KeyID: e.keyID, KeyName: e.keyNm, Client: e.client,
		Requests: e.requests, InFlight: e.inFlight, Waiting: len(e.waiters),
		InputTokens: e.tokensIn, OutputTokens: e.tokensOut, CachedTokens: e.cached,
		CostMicros: e.cost, SpentMicros: e.spent, Connection: e.connection,
		State: e.state.String(), FirstSeen: e.first, LastSeen: e.last,
	}
}

// List returns the sessions active within ActiveWindow (or with requests
// in flight), most recent first. ttl is the affinity TTL: a held state
// that has outlived it shows as ok.
func (g *Guard) List(ttl time.Duration) []Info {
	now := g.now()
	g.mu.Lock()
	out := make([]Info, 0, len(g.sessions))
	for _, e := range g.sessions {
		if e.inFlight == 0 && now.Sub(e.last) > ActiveWindow {
			continue
		}
		in := e.info()
		if e.idle(now, ttl) {
			in.State = StateOK.String()
		}
		out = append(out, in)
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int {
		if c := b.LastSeen.Compare(a.LastSeen); c != 0 {
			return c
		}
		return strings.Compare(a.Session, b.Session)
	})
	return out
}

// Get returns one session the guard knows.
func (g *Guard) Get(session string, ttl time.Duration) (Info, bool) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	e := g.sessions[session]
	if e == nil {
		return Info{}, false
	}
	in := e.info()
	if e.idle(now, ttl) {
		in.State = StateOK.String()
	}
	return in, true
}

// sweep forgets the sessions idle for longer than both ActiveWindow and
// ttl (those at MaxSessions: idle for ttl). g.mu is held.
func (g *Guard) sweep(now time.Time, ttl time.Duration) {
	g.sweptAt = now
	keep := max(ActiveWindow, ttl)
	if len(g.sessions) >= MaxSessions {
		keep = max(ttl, time.Second)
	}
	for k, e := range g.sessions {
		if e.inFlight == 0 && len(e.waiters) == 0 && now.Sub(e.last) > keep {
			delete(g.sessions, k)
		}
	}
}

// Product is the product of a User-Agent: its first token up to a '/' or
// a space ("claude-cli/1.0.3 (external)" → "claude-cli"), at most 64 bytes.
func Product(ua string) string {
	if i := strings.IndexAny(ua, "/ "); i >= 0 {
		ua = ua[:i]
	}
	if len(ua) > 64 {
		ua = ua[:64]
	}
	return ua
}
