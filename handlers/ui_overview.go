package handlers

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// The overview's sparklines and "rejected in the last minute" need earlier gate
// snapshots. They are sampled lazily — on an overview or /live request, when the
// newest sample is older than historyEvery — so no goroutine runs for them, and the
// history is simply sparse while nobody is looking.
const (
	historyEvery = 5 * time.Second
	historyKeep  = 120 // 10 minutes at one sample each 5 s
	liveInterval = 2000
)

// gateHistory is a ring of gate snapshots, oldest first.
type gateHistory struct {
	every time.Duration
	keep  int

	mu      sync.Mutex
	samples []web.GateSnapshot
}

func newGateHistory(every time.Duration, keep int) *gateHistory {
	return &gateHistory{every: every, keep: keep}
}

// observe returns the samples taken before now (oldest first, a copy) and records
// gates as a new sample when the newest one is older than h.every.
func (h *gateHistory) observe(now time.Time, gates []web.GateStat) []web.GateSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	earlier := slices.Clone(h.samples)
	if n := len(h.samples); n == 0 || now.Sub(h.samples[n-1].At) >= h.every {
		if n >= h.keep {
			h.samples = slices.Delete(h.samples, 0, n-h.keep+1)
		}
		h.samples = append(h.samples, web.GateSnapshot{At: now, Gates: gates})
	}
	return earlier
}

// uiGates returns the gateway's live view (empty without a gateway).
func (s *Server) uiGates() GatesView {
	if s.deps.Gates == nil {
		return GatesView{}
	}
	return s.deps.Gates.GatesSnapshot()
}

// webGates converts the API's gate list into the view model's.
func webGates(v GatesView) []web.GateStat {
	out := make([]web.GateStat, 0, len(v.Gates))
	for _, g := range v.Gates {
		out = append(out, web.GateStat{
			Key: g.Key, Level: g.Level, Cap: g.Cap, InFlight: g.InFlight, Queued: g.Queued,
			Admitted: g.Admitted, Timeouts: g.Timeouts, QueueFull: g.QueueFull,
			Cancels: g.Cancels, WaitMsTotal: g.WaitMsTotal, Waits: g.Waits,
		})
	}
	return out
}

// uiOverview serves GET /: every connection's gates, drawn.
func (s *Server) uiOverview(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	conns, err := s.store.ListConnections(r.Context())
	if err != nil {
		return err
	}
	live := s.uiGates()
	gates := webGates(live)
	history := s.dash.history.observe(rq.now, gates)
	health := map[string]ConnectionLive{}
	for _, c := range live.Connections {
		health[c.ID] = c
	}
	in := web.OverviewInput{
		Now: rq.now, Gates: gates, History: history,
		LiveURL: "/live", LiveIntervalMs: liveInterval,
	}
	if c := live.Cluster; c != nil {
		in.Cluster = &web.ClusterStatus{Mode: c.Mode, ReplicaID: c.ReplicaID, Replicas: c.Replicas}
	}
	for _, c := range conns {
		in.Connections = append(in.Connections, connectionStatus(c, health[c.ID]))
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.OverviewPage(s.uiPage(r, rq), web.BuildOverview(in)))
}

// connectionStatus is the overview's header of one connection.
func connectionStatus(c store.Connection, h ConnectionLive) web.ConnectionStatus {
	st := web.ConnectionStatus{
		ID: c.ID, Name: c.Name, Provider: c.Provider, Enabled: c.Enabled,
		Health: h.Health, Reason: h.Reason,
	}
	if st.Health == "" {
		st.Health = web.HealthOK
	}
	if h.Until != nil {
		st.Until = *h.Until
	}
	kinds := make([]string, 0, len(h.Budgets))
	for k := range h.Budgets {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		b := h.Budgets[k]
		st.Budgets = append(st.Budgets, web.Budget{Kind: k, Limit: b.Limit, Remaining: b.Remaining, ResetAt: b.ResetAt})
	}
	return st
}

// uiLive serves GET /live, the JSON static/app.js polls: the body of GET
// /api/v1/gates, for a signed-in user. It also feeds the history.
func (s *Server) uiLive(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	s.dash.history.observe(rq.now, webGates(s.uiGates()))
	if err := s.dash.sessions.save(r, w, rq.sess); err != nil {
		return err
	}
	return s.getGates(w, r)
}

// connectionLoad sums the live load of connection id: in flight on its connection
// gate, queued on any of its gates.
func connectionLoad(v GatesView, id string) (inFlight, queued int) {
	connKey, modelPrefix := "connection:"+id, "model:"+id+":"
	for _, g := range v.Gates {
		switch {
		case g.Key == connKey:
			inFlight += g.InFlight
			queued += g.Queued
		case strings.HasPrefix(g.Key, modelPrefix):
			queued += g.Queued
		}
	}
	return inFlight, queued
}
