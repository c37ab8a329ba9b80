package upstreamtest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Counter is one concurrency and request counter.
type Counter struct {
	// InFlight is the number of requests being answered now; a stream
	// counts until it ends or the client goes away.
	InFlight int `json:"inFlight"`
	// Peak is the highest InFlight since the last Reset (or, after a Reset,
	// the InFlight at the time of the Reset).
	Peak int `json:"peak"`
	// Requests counts requests received since the last Reset.
	Requests int64 `json:"requests"`
	// Failures counts injected failures since the last Reset.
	Failures int64 `json:"failures"`
}

// KeyModelCounter is the counter of one (API key, model) pair.
type KeyModelCounter struct {
	Key   string `json:"key"`
	Model string `json:"model"`
	Counter
}

// Stats is a snapshot of the server's counters. API keys appear as sent:
// this is a fake provider and only ever sees test keys.
type Stats struct {
	Total   Counter            `json:"total"`
	ByKey   map[string]Counter `json:"byKey"`
	ByModel map[string]Counter `json:"byModel"`
	// ByKeyModel is sorted by key, then model.
	ByKeyModel []KeyModelCounter `json:"byKeyModel"`
	// KeysSeen lists every API key received since the last Reset, sorted.
	// A request without a key is recorded as the empty key.
	KeysSeen []string `json:"keysSeen"`
	// LastKeyByModel maps a model to the API key of its latest request.
	LastKeyByModel map[string]string `json:"lastKeyByModel"`
}

// counter is the live form of Counter.
type counter struct {
	inFlight int
	peak     int
	requests int64
	failures int64
}

func (c *counter) enter() {
	c.inFlight++
	c.requests++
	if c.inFlight > c.peak {
		c.peak = c.inFlight
	}
}

func (c *counter) snapshot() Counter {
	return Counter{InFlight: c.inFlight, Peak: c.peak, Requests: c.requests, Failures: c.failures}
}

// reset forgets history but keeps what is in flight now.
func (c *counter) reset() {
	c.peak = c.inFlight
	c.requests = 0
	c.failures = 0
}

type keyModel struct{ key, model string }

// pairState is the counter and arrival ring of one (key, model) pair.
type pairState struct {
	counter
	arrivals []time.Time // ring buffer, len <= cap == Options.ArrivalsKept
	next     int         // next slot to overwrite once the ring is full
}

func (p *pairState) arrive(now time.Time, keep int) {
	if len(p.arrivals) < keep {
		if p.arrivals == nil {
			p.arrivals = make([]time.Time, 0, min(keep, 64))
		}
		p.arrivals = append(p.arrivals, now)
		return
	}
	p.arrivals[p.next] = now
	p.next = (p.next + 1) % len(p.arrivals)
}

// tracked is what a request holds so that leaving needs no map lookups.
type tracked struct {
	pair  *pairState
	key   *counter
	model *counter
}

// enter records the arrival of a request and resolves its behaviour, in one
// critical section.
func (s *Server) enter(r *http.Request, key, model string, now time.Time) (tracked, effective, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	km := keyModel{key, model}
	p := s.pairs[km]
	if p == nil {
		p = &pairState{}
		s.pairs[km] = p
	}
	kc := s.byKey[key]
	if kc == nil {
		kc = &counter{}
		s.byKey[key] = kc
	}
	mc := s.byModel[model]
	if mc == nil {
		mc = &counter{}
		s.byModel[model] = mc
	}
	p.enter()
	kc.enter()
	mc.enter()
	s.total.enter()
	p.arrive(now, s.opts.ArrivalsKept)
	if s.lastKey[model] != key {
		s.lastKey[model] = key
	}
	s.notifyLocked()

	e := effective{
		latency:       s.opts.Latency,
		chunks:        s.opts.Chunks,
		chunkInterval: s.opts.ChunkInterval,
		usageTokens:   s.opts.UsageTokens,
	}
	s.def.overlay(&e)
	s.keyBehavior[key].overlay(&e)
	if err := applyHeaders(r.Header, &e); err != nil {
		return tracked{p, kc, mc}, e, err
	}
	if e.maxInFlight > 0 && kc.inFlight > e.maxInFlight {
		e.overLimit = true
		e.fail, e.from = Failure("429"), nil
	}
	if e.fail != FailInherit && e.fail != FailNone {
		if e.from != nil {
			e.from.failed++
		}
		p.failures++
		kc.failures++
		mc.failures++
		s.total.failures++
	}
	return tracked{p, kc, mc}, e, nil
}

// leave ends a request entered with enter.
func (s *Server) leave(t tracked) {
	s.mu.Lock()
	t.pair.inFlight--
	t.key.inFlight--
	t.model.inFlight--
	s.total.inFlight--
	s.notifyLocked()
	s.mu.Unlock()
}

// notifyLocked wakes waiters of WaitUntil. A channel exists only while
// someone waits, so the hot path pays nothing otherwise.
func (s *Server) notifyLocked() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Stats returns a snapshot of every counter.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{
		Total:          s.total.snapshot(),
		ByKey:          make(map[string]Counter, len(s.byKey)),
		ByModel:        make(map[string]Counter, len(s.byModel)),
		ByKeyModel:     make([]KeyModelCounter, 0, len(s.pairs)),
		KeysSeen:       make([]string, 0, len(s.byKey)),
		LastKeyByModel: make(map[string]string, len(s.lastKey)),
	}
	for k, c := range s.byKey {
		st.ByKey[k] = c.snapshot()
		if c.requests > 0 {
			st.KeysSeen = append(st.KeysSeen, k)
		}
	}
	for m, c := range s.byModel {
		st.ByModel[m] = c.snapshot()
	}
	for km, p := range s.pairs {
		st.ByKeyModel = append(st.ByKeyModel, KeyModelCounter{Key: km.key, Model: km.model, Counter: p.snapshot()})
	}
	for m, k := range s.lastKey {
		st.LastKeyByModel[m] = k
	}
	slices.Sort(st.KeysSeen)
	slices.SortFunc(st.ByKeyModel, func(a, b KeyModelCounter) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Model, b.Model))
	})
	return st
}

// Reset forgets request counts, peaks, arrivals, failures and the keys seen.
// Requests in flight stay counted (and set the new peaks), so counters never
// go negative when they finish.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headers, s.uris = nil, nil
	s.total.reset()
	for km, p := range s.pairs {
		if p.inFlight == 0 {
			delete(s.pairs, km)
			continue
		}
		p.reset()
		p.arrivals, p.next = nil, 0
	}
	for k, c := range s.byKey {
		if c.inFlight == 0 {
			delete(s.byKey, k)
			continue
		}
		c.reset()
	}
	for m, c := range s.byModel {
		if c.inFlight == 0 {
			delete(s.byModel, m)
			continue
		}
		c.reset()
	}
	clear(s.lastKey)
	s.cache = promptCache{} // the accounts' caches and tallies
	s.notifyLocked()
}

// Peak returns the peak concurrency of (apiKey, model) since the last Reset.
func (s *Server) Peak(apiKey, model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pairs[keyModel{apiKey, model}]; p != nil {
		return p.peak
	}
	return 0
}

// Requests returns how many requests (apiKey, model) received since the
// last Reset.
func (s *Server) Requests(apiKey, model string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pairs[keyModel{apiKey, model}]; p != nil {
		return p.requests
	}
	return 0
}

// InFlight returns the number of requests being answered now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total.inFlight
}

// Arrivals returns the arrival times of the latest requests of
// (apiKey, model), oldest first; at most Options.ArrivalsKept of them.
func (s *Server) Arrivals(apiKey, model string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pairs[keyModel{apiKey, model}]
	if p == nil {
		return nil
	}
	out := make([]time.Time, 0, len(p.arrivals))
	out = append(out, p.arrivals[p.next:]...)
	return append(out, p.arrivals[:p.next]...)
}

// SawKey reports whether any request since the last Reset carried apiKey.
func (s *Server) SawKey(apiKey string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.byKey[apiKey]
	return c != nil && c.requests > 0
}

// LastKey returns the API key of the latest request for model, and whether
// there was one since the last Reset.
func (s *Server) LastKey(model string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.lastKey[model]
	return k, ok
}

// WaitUntil blocks until cond holds for a snapshot of the counters, or ctx
// ends. cond is evaluated after every change of the counters.
func (s *Server) WaitUntil(ctx context.Context, cond func(Stats) bool) error {
	for {
		// Take the channel before looking, so a change after the look
		// closes a channel we already hold.
		s.mu.Lock()
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		if cond(s.Stats()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("upstreamtest: wait for condition (in flight %d): %w", s.InFlight(), ctx.Err())
		}
	}
}

// WaitInFlight blocks until exactly n requests are in flight, or ctx ends.
// Tests use it as a barrier: launch n slow requests, wait for n in flight.
func (s *Server) WaitInFlight(ctx context.Context, n int) error {
	err := s.WaitUntil(ctx, func(st Stats) bool { return st.Total.InFlight == n })
	if err != nil {
		return fmt.Errorf("upstreamtest: want %d in flight: %w", n, err)
	}
	return nil
}

// serveStats answers GET /stats.
func (s *Server) serveStats(w http.ResponseWriter) {
	body, err := json.Marshal(s.Stats())
	if err != nil {
		http.Error(w, "upstreamtest: encode stats", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}
