package reports

import (
	"context"
	"slices"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// Range is a time range of the /usage page: its length and bucket.
type Range struct {
	Name   string
	Span   time.Duration
	Bucket string // "minute", "hour" or "day"
	Label  string // Go layout of a bucket's label
}

// UsageRanges are the /usage page's time ranges.
var UsageRanges = []Range{
	{"15m", 15 * time.Minute, "minute", "15:04"},
	{"1h", time.Hour, "minute", "15:04"},
	{"24h", 24 * time.Hour, "hour", "15:04"},
	{"7d", 7 * 24 * time.Hour, "day", "01-02"},
	{"30d", 30 * 24 * time.Hour, "day", "01-02"},
}

// Window is the range's buckets ending with the one holding now: [since, until).
func (rg Range) Window(now time.Time) (since, until time.Time) {
	until = now.UTC().Truncate(time.Hour).Add(time.Hour)
	if rg.Bucket == "minute" {
		until = now.UTC().Truncate(time.Minute).Add(time.Minute)
	}
	if rg.Bucket == "day" {
		d := now.UTC()
		until = time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, time.UTC)
	}
	return until.Add(-rg.Span), until
}

// usageChartKeys is how many keys or models a chart shows by name; the rest are summed as one.
const usageChartKeys = 7

// UsageRangeOf is the /usage range named v, the last 24 hours by default.
func UsageRangeOf(v string) Range {
	for _, r := range UsageRanges {
		if r.Name == v {
			return r
		}
	}
	return UsageRanges[2] // the last 24 hours
}

// UsageCharts builds the /usage charts for range rg ending at now: requests and
// rejections per bucket, tokens and spend per key per bucket, and the top models.
func UsageCharts(ctx context.Context, st *store.Store, l *web.Localizer, rg Range, now time.Time) ([]web.Chart, error) {
	since, until := rg.Window(now)
	byKey, err := st.RequestUsage(ctx, store.UsageQuery{GroupBy: "key", Bucket: rg.Bucket, Since: since, Until: until})
	if err != nil {
		return nil, err
	}
	byModel, err := st.RequestUsage(ctx, store.UsageQuery{GroupBy: "model", Bucket: rg.Bucket, Since: since, Until: until})
	if err != nil {
		return nil, err
	}
	step := time.Hour
	switch rg.Bucket {
	case "minute":
		step = time.Minute
	case "day":
		step = 24 * time.Hour
	}
	var buckets []time.Time
	var labels []string
	index := map[time.Time]int{}
	for b := since; b.Before(until); b = b.Add(step) {
		index[b] = len(buckets)
		buckets = append(buckets, b)
		labels = append(labels, b.Format(rg.Label))
	}
	n := len(buckets)
	csv := func(chart string) string { return "/usage.csv?range=" + rg.Name + "&chart=" + chart }

	// Requests: served, failed (not refused) and refused by Gatehouse, stacked.
	ok, failed, rejected := requestSeries(byKey, index, n)
	reqs := web.Chart{ID: "requests", Title: l.T("usage.requests.title"), Desc: l.T("usage.requests.desc"),
		Unit: l.T("usage.unit.requests"), Labels: labels, CSVURL: csv("requests"), Empty: l.T("usage.empty"),
		Series: []web.ChartSeries{{Name: l.T("usage.served"), Values: ok}, {Name: l.T("usage.failed"), Values: failed},
			{Name: l.T("usage.rejected"), Values: rejected}}}

	// Tokens and spend per key: the keys with the most tokens by name, the rest as one.
	tokens := map[string]float64{}
	for _, u := range byKey {
		tokens[u.Group] += float64(u.InputTokens + u.OutputTokens)
	}
	top := topNames(tokens)
	tokSeries, spendSeries := perGroup(byKey, top, index, n, l.T("usage.other"))
	tok := web.Chart{ID: "tokens", Title: l.T("usage.tokens.title"), Desc: l.T("usage.tokens.desc"),
		Unit: l.T("usage.unit.tokens"), Labels: labels, Series: tokSeries, CSVURL: csv("tokens"), Empty: l.T("usage.empty")}
	spend := web.Chart{ID: "spend", Title: l.T("usage.spend.title"), Desc: l.T("usage.spend.desc"),
		Unit: "USD", Labels: labels, Series: spendSeries, CSVURL: csv("spend"), Empty: l.T("usage.empty"), Decimal: true}

	// Top models by requests over the whole range; requests of no model are
	// not a model (the cost ranking shows them apart).
	models := map[string]float64{}
	for _, u := range byModel {
		if u.Group != "" {
			models[u.Group] += float64(u.Requests)
		}
	}
	names := topNames(models)
	counts := make([]float64, len(names))
	for i, m := range names {
		counts[i] = models[m]
	}
	for i, m := range names {
		if m == "" {
			names[i] = l.T("usage.noModel")
		}
	}
	mod := web.Chart{ID: "models", Title: l.T("usage.models.title"), Desc: l.T("usage.models.desc"),
		Unit: l.T("usage.unit.requests"), Labels: names, CSVURL: csv("models"), Empty: l.T("usage.empty"),
		Series: []web.ChartSeries{{Name: l.T("usage.unit.requests"), Values: counts}}}
	return []web.Chart{reqs, tok, spend, mod}, nil
}

// topNames is the usageChartKeys names of m with the largest values, largest first.
func topNames(m map[string]float64) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		}
		if a > b {
			return 1
		}
		return 0
	})
	return names[:min(len(names), usageChartKeys)]
}

// perGroup splits rows into one tokens and one spend series per named group, the
// others summed under other.
func perGroup(rows []store.UsageRow, names []string, index map[time.Time]int, n int, other string) (tok, spend []web.ChartSeries) {
	pos := map[string]int{}
	for i, name := range names {
		pos[name] = i
		label := name
		if label == "" {
			label = "–"
		}
		tok = append(tok, web.ChartSeries{Name: label, Values: make([]float64, n)})
		spend = append(spend, web.ChartSeries{Name: label, Values: make([]float64, n)})
	}
	otherAt := -1
	for _, u := range rows {
		i, in := index[u.Bucket]
		if !in {
			continue
		}
		g, named := pos[u.Group]
		if !named {
			if otherAt < 0 {
				otherAt = len(tok)
				tok = append(tok, web.ChartSeries{Name: other, Values: make([]float64, n)})
				spend = append(spend, web.ChartSeries{Name: other, Values: make([]float64, n)})
			}
			g = otherAt
		}
		tok[g].Values[i] += float64(u.InputTokens + u.OutputTokens)
		spend[g].Values[i] += httpkit.MicrosToUSD(u.CostMicros)
	}
	return tok, spend
}
