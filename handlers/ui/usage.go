package ui

import (
	"context"
	"net/http"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/handlers/ui/reports"
	"github.com/gatehouse-dev/gatehouse/web"
)

// Usage serves GET /usage.
func (s *Server) Usage(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	v, err := s.usageView(r.Context(), rq, r.URL.Query().Get("range"))
	if err != nil {
		return err
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.UsagePage(s.uiPage(r, rq), v))
}

// usageLiveInterval is how often /usage redraws its charts: they count whole hours
// and days, and each redraw reads the range's aggregates again.
const usageLiveInterval = 10000

// UsageLive serves GET /usage/live?range=: the page's charts and cache table as
// HTML, for its live poll to put in place.
func (s *Server) UsageLive(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	v, err := s.usageView(r.Context(), rq, r.URL.Query().Get("range"))
	if err != nil {
		return err
	}
	if err := s.dash.sessions.Write(r, w, rq.sess); err != nil {
		return err
	}
	page := s.uiPage(r, rq)
	parts := map[string]templ.Component{"cache": web.CacheTable(page, v.Cache)}
	for _, c := range v.Charts {
		parts["chart-"+c.ID] = web.ChartView(page, c)
	}
	frags, err := s.renderFragments(r.Context(), parts)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, struct {
		Fragments map[string]string `json:"fragments"`
	}{frags}, "")
}

// usageView is the /usage page of range name (the first range when unknown) at rq.now.
func (s *Server) usageView(ctx context.Context, rq *uiRequest, name string) (web.UsageView, error) {
	rg := reports.UsageRangeOf(name)
	charts, err := reports.UsageCharts(ctx, s.store, rq.l, rg, rq.now)
	if err != nil {
		return web.UsageView{}, err
	}
	since, until := rg.Window(rq.now)
	rows, err := reports.CacheRows(ctx, s.store, since, until, reports.CacheGroups...)
	if err != nil {
		return web.UsageView{}, err
	}
	v := web.UsageView{Range: rg.Name, Charts: charts, Cache: web.CacheView{Range: rq.l.T("usage.range." + rg.Name), Rows: rows},
		LiveURL: "/usage/live?range=" + rg.Name, LiveIntervalMs: usageLiveInterval}
	cost, err := reports.CostView(ctx, s.store, rq.l.T("usage.range."+rg.Name), since, until)
	if err != nil {
		return web.UsageView{}, err
	}
	v.Cost = *cost
	for _, o := range reports.UsageRanges {
		v.Ranges = append(v.Ranges, web.Option{Value: o.Name, Label: rq.l.T("usage.range." + o.Name)})
	}
	return v, nil
}

// UsageCSV serves GET /usage.csv?range=&chart=: one chart's numbers, a row per label.
func (s *Server) UsageCSV(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	q := r.URL.Query()
	rg := reports.UsageRangeOf(q.Get("range"))
	if q.Get("chart") == "cache" {
		since, until := rg.Window(rq.now)
		rows, err := reports.CacheRows(r.Context(), s.store, since, until, reports.CacheGroups...)
		if err != nil {
			return err
		}
		return writeCSV(w, "usage-cache-"+rg.Name+".csv", reports.CacheCSV(rows))
	}
	charts, err := reports.UsageCharts(r.Context(), s.store, rq.l, rg, rq.now)
	if err != nil {
		return err
	}
	for _, c := range charts {
		if c.ID != q.Get("chart") {
			continue
		}
		head := []string{"label"}
		for _, sr := range c.Series {
			head = append(head, sr.Name+" ("+c.Unit+")")
		}
		rows := [][]string{head}
		for i, label := range c.Labels {
			row := []string{label}
			for _, sr := range c.Series {
				row = append(row, c.Cell(sr, i))
			}
			rows = append(rows, row)
		}
		return writeCSV(w, "usage-"+c.ID+"-"+rg.Name+".csv", rows)
	}
	return &uiStatus{status: http.StatusNotFound, key: "error.notFound"}
}
