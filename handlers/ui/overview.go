package ui

import (
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/handlers/ui/reports"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
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
func (h *gateHistory) observe(now time.Time, gates []live.Gate) []web.GateSnapshot {
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

// Overview serves GET /: every connection's gates, drawn.
func (s *Server) Overview(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	conns, err := s.store.ListConnections(r.Context())
	if err != nil {
		return err
	}
	snap := s.LiveSnapshot()
	history := s.dash.history.observe(rq.now, snap.Gates)
	health := map[string]live.Connection{}
	for _, c := range snap.Connections {
		health[c.ID] = c
	}
	in := web.OverviewInput{
		Now: rq.now, Gates: snap.Gates, History: history,
		LiveURL: "/live?fragments=overview", LiveIntervalMs: liveInterval, Cluster: snap.Cluster, Clients: snap.Clients,
	}
	for _, c := range conns {
		in.Connections = append(in.Connections, connectionStatus(c, health[c.ID]))
	}
	v := web.BuildOverview(in)
	v.Traffic = s.traffic(r.Context(), rq.now)
	if !s.deps.RequestLogOff {
		if v.Chart, err = reports.OverviewChart(r.Context(), s.store, rq.l, reports.OverviewRangeOf(r.URL.Query().Get("range")), rq.now); err != nil {
			return err
		}
		if v.Cache, err = reports.CacheView(r.Context(), s.store, rq.l, rq.now); err != nil {
			return err
		}
		if v.Cost, err = reports.CostView(r.Context(), s.store, rq.l.T("cost.last24h"), rq.now.Add(-24*time.Hour), rq.now); err != nil {
			return err
		}
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.OverviewPage(s.uiPage(r, rq), v))
}

// connectionLive is connection c as the overview draws it, for its own page.
func (s *Server) connectionLive(r *http.Request, rq *uiRequest, c store.Connection) *web.Overview {
	snap := s.LiveSnapshot()
	history := s.dash.history.observe(rq.now, snap.Gates)
	var h live.Connection
	for _, sc := range snap.Connections {
		if sc.ID == c.ID {
			h = sc
		}
	}
	v := web.BuildOverview(web.OverviewInput{
		Now: rq.now, Gates: snap.Gates, History: history, Connections: []web.ConnectionStatus{connectionStatus(c, h)},
		LiveURL: "/live?fragments=overview", LiveIntervalMs: liveInterval, Cluster: snap.Cluster, Clients: snap.Clients,
	})
	v.Traffic = s.traffic(r.Context(), rq.now)
	return &v
}

// connectionStatus is the overview's header of one connection: identity from the
// store (the gateway may not have caught up with an edit yet), health from the gateway.
func connectionStatus(c store.Connection, h live.Connection) web.ConnectionStatus {
	h.ID, h.Name, h.Provider = c.ID, c.Name, c.Provider
	if h.Health == "" {
		h.Health = live.HealthOK
	}
	return web.ConnectionStatus{Connection: h, Enabled: c.Enabled}
}

// LiveView is the JSON static/app.js polls: the body of GET /api/v1/gates plus each
// connection's load as the connections list shows it (connectionLoad), so the page
// never rebuilds a gate key.
type LiveView struct {
	httpkit.GatesView
	ConnectionLoad map[string]ConnLoadView `json:"connectionLoad"`
	// Fragments are the overview's request-log parts as HTML, by the name of the
	// element (data-live-fragment) whose content each replaces.
	Fragments map[string]string `json:"fragments,omitempty"`
}

type ConnLoadView struct {
	InFlight int `json:"inFlight"`
	Queued   int `json:"queued"`
}

// Live serves GET /live for a signed-in user. It also feeds the history.
func (s *Server) Live(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	snap := s.LiveSnapshot()
	history := s.dash.history.observe(rq.now, snap.Gates)
	if err := s.dash.sessions.Write(r, w, rq.sess); err != nil {
		return err
	}
	v := LiveView{GatesView: httpkit.NewGatesView(snap), ConnectionLoad: connectionLoads(snap.Gates)}
	if r.URL.Query().Get("fragments") == "overview" {
		page := s.uiPage(r, rq)
		f, err := s.renderFragments(r.Context(), web.TrafficFragments(page, s.traffic(r.Context(), rq.now)))
		if err != nil {
			return err
		}
		// The waiting keys and the waits, drawn as the page draws them, from the
		// gateway's connections (the store's names may be newer; the next page
		// load shows those).
		in := web.OverviewInput{Now: rq.now, Gates: snap.Gates, History: history, Clients: snap.Clients}
		for _, c := range snap.Connections {
			in.Connections = append(in.Connections, web.ConnectionStatus{Connection: c, Enabled: true})
		}
		o, err := s.renderFragments(r.Context(), web.OverviewFragments(page, web.BuildOverview(in)))
		if err != nil {
			return err
		}
		maps.Copy(f, o)
		v.Fragments = f
	}
	return httpkit.WriteJSON(w, http.StatusOK, v, "")
}

// connectionLoads sums the live load of every connection: in flight on its
// connection gate, queued on any of its gates (connection and model), by id;
// shadow gates, which enforce nothing, are left out.
func connectionLoads(gates []live.Gate) map[string]ConnLoadView {
	out := make(map[string]ConnLoadView)
	for _, g := range gates {
		if g.ConnectionID == "" || g.Shadow {
			continue
		}
		l := out[g.ConnectionID]
		switch g.Level {
		case live.LevelConnection:
			l.InFlight += g.InFlight
			l.Queued += g.Queued
		case live.LevelModel:
			l.Queued += g.Queued
		}
		out[g.ConnectionID] = l
	}
	return out
}
