package ui

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/web"
)

// trafficEvery is how long the overview's request-log numbers are reused: every
// open overview polls /live, and one query a second serves them all.
const trafficEvery = time.Second

// trafficCache holds the last reading of the request log for the overview.
type trafficCache struct {
	mu  sync.Mutex
	at  time.Time
	val web.Traffic
}

// traffic reads the request log's last minute and today's spend (cached for
// trafficEvery). With the log off, or the database away, the page says so.
func (s *Server) traffic(ctx context.Context, now time.Time) web.Traffic {
	if s.deps.RequestLogOff {
		return web.Traffic{Off: true}
	}
	c := &s.dash.traffic
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && now.Sub(c.at) < trafficEvery && !now.Before(c.at) {
		return c.val
	}
	t, err := s.readTraffic(ctx, now)
	if err != nil {
		s.log.WarnContext(ctx, "dashboard: read the request log", slog.Any("error", err))
		return web.Traffic{Off: true}
	}
	c.at, c.val = now, t
	return t
}

func (s *Server) readTraffic(ctx context.Context, now time.Time) (web.Traffic, error) {
	recent, err := s.store.RecentTraffic(ctx, now.Add(-time.Minute), now)
	if err != nil {
		return web.Traffic{}, err
	}
	today, err := s.store.DayTotals(ctx, now)
	if err != nil {
		return web.Traffic{}, err
	}
	keys, err := s.store.ListClientKeys(ctx)
	if err != nil {
		return web.Traffic{}, err
	}
	conns, err := s.store.ListConnections(ctx)
	if err != nil {
		return web.Traffic{}, err
	}
	spend, err := s.store.ClientKeysSpend(ctx, now)
	if err != nil {
		return web.Traffic{}, err
	}
	in := web.TrafficInput{Now: now, KeyNames: make(map[string]string, len(keys)), KeyBudgets: make(map[string]web.KeyBudget, len(keys))}
	for _, c := range conns {
		in.ConnectionIDs = append(in.ConnectionIDs, c.ID)
	}
	for _, k := range keys {
		in.KeyNames[k.ID] = k.Name
		lim, _ := limits.NormalizeClientKeyLimits(k.Limits)
		in.KeyBudgets[k.ID] = web.KeyBudget{Daily: lim.BudgetUSDDaily, Monthly: lim.BudgetUSDMonthly, SpentMonthMicros: spend[k.ID].MonthMicros}
	}
	for _, r := range recent {
		in.Recent = append(in.Recent, web.TrafficCount{ConnectionID: r.ConnectionID, KeyID: r.KeyID,
			Status: r.Status, Code: r.Code, Requests: r.Requests, UpstreamFailures: r.UpstreamFailures})
	}
	for _, d := range today {
		in.Today = append(in.Today, web.DayTotal{KeyID: d.KeyID, ConnectionID: d.ConnectionID,
			Requests: d.Requests, Tokens: d.Tokens, CostMicros: d.CostMicros})
	}
	return web.BuildTraffic(in), nil
}

// renderFragments renders the overview's live parts for /live, by the name of the
// element each replaces.
func (s *Server) renderFragments(ctx context.Context, parts map[string]templ.Component) (map[string]string, error) {
	out := make(map[string]string, len(parts))
	var buf bytes.Buffer
	for name, c := range parts {
		buf.Reset()
		if err := c.Render(ctx, &buf); err != nil {
			return nil, err
		}
		out[name] = buf.String()
	}
	return out, nil
}
