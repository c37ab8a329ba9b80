package reports

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// CacheGroups are the groups of the prompt-cache table, in its order.
var CacheGroups = []string{"key", "connection", "model"}

// CacheRows sums the request log's prompt-cache use from since to until per
// client key, connection and model (groups, in that order, each by name);
// rows without input are left out.
func CacheRows(ctx context.Context, st *store.Store, since, until time.Time, groups ...string) ([]web.CacheRow, error) {
	var out []web.CacheRow
	for _, g := range groups {
		rows, err := st.RequestUsage(ctx, store.UsageQuery{GroupBy: g, Bucket: "day", Since: since, Until: until})
		if err != nil {
			return nil, err
		}
		sum := map[[2]string]*web.CacheRow{}
		var order []*web.CacheRow
		for _, u := range rows {
			k := [2]string{u.GroupID, u.Group}
			r := sum[k]
			if r == nil {
				r = &web.CacheRow{Group: g, ID: u.GroupID, Name: u.Group}
				sum[k] = r
				order = append(order, r)
			}
			r.Input += u.InputTokens
			r.Read += u.CachedTokens
			r.Write += u.CacheWriteTokens
		}
		slices.SortFunc(order, func(a, b *web.CacheRow) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
		for _, r := range order {
			if r.Input > 0 {
				out = append(out, *r)
			}
		}
	}
	return out, nil
}

// CacheView is the prompt-cache table over the 24 hours before now.
func CacheView(ctx context.Context, st *store.Store, l *web.Localizer, now time.Time) (*web.CacheView, error) {
	rows, err := CacheRows(ctx, st, now.Add(-24*time.Hour), now, CacheGroups...)
	if err != nil {
		return nil, err
	}
	return &web.CacheView{Range: l.T("cache.last24h"), Rows: rows}, nil
}

// CacheCSV is the prompt-cache table as CSV rows, with a header.
func CacheCSV(rows []web.CacheRow) [][]string {
	out := [][]string{{"group", "name", "input_tokens", "cached_tokens", "cache_write_tokens", "cache_hit_ratio"}}
	for _, r := range rows {
		out = append(out, []string{r.Group, r.Name, strconv.FormatInt(r.Input, 10), strconv.FormatInt(r.Read, 10),
			strconv.FormatInt(r.Write, 10), strconv.FormatFloat(r.HitRatio(), 'f', 4, 64)})
	}
	return out
}

// CostView ranks models, providers, connections and keys by cost from since
// to until (rangeText names the range in words).
func CostView(ctx context.Context, st *store.Store, rangeText string, since, until time.Time) (*web.CostView, error) {
	rows, err := st.CostRanking(ctx, since, until)
	if err != nil {
		return nil, err
	}
	out := make([]web.CostRow, len(rows))
	for i, r := range rows {
		out[i] = web.CostRow(r)
	}
	v := web.BuildCostView(rangeText, out, web.CostTop)
	return &v, nil
}
