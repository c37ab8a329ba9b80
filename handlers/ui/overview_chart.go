package ui

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// overviewRanges are the overview chart's time ranges: the last 15 minutes or hour
// by minute, the last day by hour, the last week by day.
var overviewRanges = []usageRange{
	{"15m", 15 * time.Minute, "minute", "15:04"},
	{"1h", time.Hour, "minute", "15:04"},
	{"24h", 24 * time.Hour, "hour", "15:04"},
	{"7d", 7 * 24 * time.Hour, "day", "01-02"},
}

// overviewRangeOf is the overview range named v, 1h by default.
func overviewRangeOf(v string) usageRange {
	for _, r := range overviewRanges {
		if r.name == v {
			return r
		}
	}
	return overviewRanges[1]
}

// overviewChart draws the requests of range rg ending at now from the request log's
// aggregates: served, failed and refused by Gatehouse per bucket, stacked.
func (s *Server) overviewChart(ctx context.Context, l *web.Localizer, rg usageRange, now time.Time) (web.OverviewChart, error) {
	step := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[rg.bucket]
	until := now.UTC().Truncate(step).Add(step)
	if rg.bucket == "day" {
		d := now.UTC()
		until = time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, time.UTC)
	}
	since := until.Add(-rg.span)
	rows, err := s.store.RequestUsage(ctx, store.UsageQuery{GroupBy: "connection", Bucket: rg.bucket, Since: since, Until: until})
	if err != nil {
		return web.OverviewChart{}, err
	}
	var labels []string
	index := map[time.Time]int{}
	for b := since; b.Before(until); b = b.Add(step) {
		index[b] = len(labels)
		labels = append(labels, b.Format(rg.label))
	}
	n := len(labels)
	ok, failed, rejected := requestSeries(rows, index, n)
	v := web.OverviewChart{Range: rg.name, Chart: web.Chart{ID: "overview-requests",
		Title: l.T("overview.chart.title", l.T("overview.range."+rg.name)), Desc: l.T("usage.requests.desc"),
		Unit: l.T("usage.unit.requests"), Labels: labels, Empty: l.T("usage.empty"),
		Series: []web.ChartSeries{{Name: l.T("usage.served"), Values: ok}, {Name: l.T("usage.failed"), Values: failed},
			{Name: l.T("usage.rejected"), Values: rejected}}}}
	for _, r := range overviewRanges {
		v.Ranges = append(v.Ranges, web.Option{Value: r.name, Label: l.T("overview.range." + r.name)})
	}
	return v, nil
}

// requestSeries stacks the request log's rows by bucket (index, n buckets):
// served, failed (not refused) and refused by Gatehouse. Rows outside the
// buckets are left out.
func requestSeries(rows []store.UsageRow, index map[time.Time]int, n int) (ok, failed, rejected []float64) {
	ok, failed, rejected = make([]float64, n), make([]float64, n), make([]float64, n)
	for _, u := range rows {
		i, in := index[u.Bucket]
		if !in {
			continue
		}
		ok[i] += float64(u.Requests - u.Errors)
		failed[i] += float64(u.Errors - u.Rejected)
		rejected[i] += float64(u.Rejected)
	}
	return ok, failed, rejected
}
