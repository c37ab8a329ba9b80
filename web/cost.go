package web

import (
	"cmp"
	"slices"
)

// CostRow is one model's, provider's, connection's or client key's requests,
// tokens and cost over a time range (store.CostRow's fields).
type CostRow struct {
	// Group is "model", "provider", "connection" or "key"; ID the
	// connection's or key's id; Name the row's name ("" for none).
	Group, ID, Name string
	Requests        int64
	InputTokens     int64
	OutputTokens    int64
	CostMicros      int64
}

// CostGroups are the groups of the cost ranking, in its order.
var CostGroups = []string{"model", "provider", "connection", "key"}

// CostTop is how many rows of a group the ranking names; the rest are one
// "other" row.
const CostTop = 10

// CostRanking is one group of the cost ranking: its top rows by cost, the
// rest summed (Other, when there are any), and the requests that had no
// model, provider, connection or key (None, shown apart, never ranked).
type CostRanking struct {
	Group string
	Rows  []CostRow
	// Other sums the rows past CostTop; OtherCount is how many they are.
	Other      *CostRow
	OtherCount int
	None       *CostRow
	// TotalMicros is the group's whole cost, for each row's share.
	TotalMicros int64
}

// CostView is the cost ranking of the overview and /usage: by model,
// provider, connection and client key over a time range.
type CostView struct {
	// Range names the time range in words ("last 24 hours").
	Range  string
	Groups []CostRanking
}

// BuildCostView ranks rows (any order) by cost within each group of
// CostGroups, highest first (then by requests, then by name), keeps the
// first top by name and sums the rest as one row.
func BuildCostView(rangeText string, rows []CostRow, top int) CostView {
	v := CostView{Range: rangeText}
	for _, g := range CostGroups {
		rk := CostRanking{Group: g}
		var ranked []CostRow
		for _, r := range rows {
			if r.Group != g {
				continue
			}
			rk.TotalMicros += r.CostMicros
			if r.Name == "" && r.ID == "" {
				none := r
				rk.None = &none
				continue
			}
			ranked = append(ranked, r)
		}
		slices.SortFunc(ranked, func(a, b CostRow) int {
			return cmp.Or(cmp.Compare(b.CostMicros, a.CostMicros), cmp.Compare(b.Requests, a.Requests),
				cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
		})
		if len(ranked) > top {
			other := CostRow{Group: g}
			for _, r := range ranked[top:] {
				other.Requests += r.Requests
				other.InputTokens += r.InputTokens
				other.OutputTokens += r.OutputTokens
				other.CostMicros += r.CostMicros
			}
			rk.Other, rk.OtherCount = &other, len(ranked)-top
			ranked = ranked[:top]
		}
		rk.Rows = ranked
		v.Groups = append(v.Groups, rk)
	}
	return v
}

// empty reports whether the view has no row at all.
func (v CostView) empty() bool {
	for _, g := range v.Groups {
		if len(g.Rows) > 0 || g.None != nil {
			return false
		}
	}
	return true
}

// share writes r's part of the group's cost as a whole percentage, "–" when
// the group cost nothing.
func (g CostRanking) share(l *Localizer, r CostRow) string {
	if g.TotalMicros <= 0 {
		return "–"
	}
	return l.Int(int64(ratio(r.CostMicros, g.TotalMicros)*100+0.5)) + " %"
}

// href is where a ranked row leads: its requests (connections, keys), or none.
func (r CostRow) href() string {
	switch {
	case r.ID == "":
		return ""
	case r.Group == "key":
		return RequestsURL("key", r.ID)
	case r.Group == "connection":
		return RequestsURL("connection", r.ID)
	}
	return ""
}

// costName is a ranked row's name; a connection or key without a name (a row
// logged before it had one) shows its id.
func costName(p Page, r CostRow) string {
	if r.Name != "" {
		return r.Name
	}
	return r.ID
}
