package reports

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// OverviewRanges are the overview chart's time ranges: the last 15 minutes or hour
// by minute, the last day by hour, the last week by day.
var OverviewRanges = []Range{
	{"15m", 15 * time.Minute, "minute", "15:04"},
	{"1h", time.Hour, "minute", "15:04"},
	{"24h", 24 * time.Hour, "hour", "15:04"},
	{"7d", 7 * 24 * time.Hour, "day", "01-02"},
}

// OverviewRangeOf is the overview range named v, 1h by default.
func OverviewRangeOf(v string) Range {
	for _, r := range OverviewRanges {
		if r.Name == v {
			return r
		}
	}
	return OverviewRanges[1]
}

// OverviewChart draws the requests of range rg ending at now from the request log's
// aggregates: served, failed and refused by Gatehouse per bucket, stacked.
func OverviewChart(ctx context.Context, st *store.Store, l *web.Localizer, rg Range, now time.Time) (web.OverviewChart, error) {
	step := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[rg.Bucket]
	until := now.UTC().Truncate(step).Add(step)
	if rg.Bucket == "day" {
		d := now.UTC()
		until = time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, time.UTC)
	}
	since := until.Add(-rg.Span)
	rows, err := st.RequestUsage(ctx, store.UsageQuery{GroupBy: "connection", Bucket: rg.Bucket, Since: since, Until: until})
	if err != nil {
		return web.OverviewChart{}, err
	}
	var labels []string
	index := map[time.Time]int{}
	for b := since; b.Before(until); b = b.Add(step) {
		index[b] = len(labels)
		labels = append(labels, b.Format(rg.Label))
	}
	n := len(labels)
	ok, failed, rejected := requestSeries(rows, index, n)
	v := web.OverviewChart{Range: rg.Name, Chart: web.Chart{ID: "overview-requests",
		Title: l.T("overview.chart.title", l.T("overview.range."+rg.Name)), Desc: l.T("usage.requests.desc"),
		Unit: l.T("usage.unit.requests"), Labels: labels, Empty: l.T("usage.empty"),
		Series: []web.ChartSeries{{Name: l.T("usage.served"), Values: ok}, {Name: l.T("usage.failed"), Values: failed},
			{Name: l.T("usage.rejected"), Values: rejected}}}}
	for _, r := range OverviewRanges {
		v.Ranges = append(v.Ranges, web.Option{Value: r.Name, Label: l.T("overview.range." + r.Name)})
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
