package web

import (
	"strconv"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/google/go-cmp/cmp"
)

// TestChartView draws a stacked chart: a titled, described SVG (role img), one bar
// per non-zero value, the y axis in the unit with a top tick rounded up, a legend,
// the numbers as a table and the CSV link; an empty chart says so instead.
func TestChartView(t *testing.T) {
	t.Parallel()
	c := Chart{ID: "requests", Title: "Requests", Desc: "Requests per hour.", Unit: "requests",
		Labels: []string{"10:00", "11:00", "12:00"}, CSVURL: "/usage.csv?chart=requests",
		Series: []ChartSeries{{Name: "served", Values: []float64{3, 0, 7}}, {Name: "refused", Values: []float64{1, 2, 0}}}}
	doc := render(t, ChartView(testPage("en", RoleViewer), c))
	fig := byTestID(t, doc, "chart-requests")
	svg := fig.Find(`[data-testid="chart-svg"]`)
	if svg.AttrOr("role", "") != "img" || text(svg.Find("title").First()) != "Requests" || text(svg.Find("desc")) != "Requests per hour." {
		t.Errorf("svg: role %q, title %q, desc %q", svg.AttrOr("role", ""), text(svg.Find("title").First()), text(svg.Find("desc")))
	}
	if n := fig.Find(`[data-testid="chart-bar"]`).Length(); n != 4 {
		t.Errorf("bars = %d, want 4 (one per non-zero value)", n)
	}
	var ticks []string
	fig.Find(`[data-testid="chart-tick"]`).Each(func(_ int, s *goquery.Selection) { ticks = append(ticks, s.Text()) })
	if diff := cmp.Diff([]string{"8", "6", "4", "2", "0"}, ticks); diff != "" {
		t.Errorf("y ticks mismatch (-want +got):\n%s", diff)
	}
	if got := text(fig.Find(`[data-testid="chart-unit"]`)); got != "requests" {
		t.Errorf("unit %q", got)
	}
	if got := fig.Find(`[data-testid="chart-legend"] li`).Length(); got != 2 {
		t.Errorf("legend entries = %d, want 2", got)
	}
	if got := fig.Find(`[data-testid="chart-table"] tbody tr`).Length(); got != 3 {
		t.Errorf("table rows = %d, want 3", got)
	}
	if href := fig.Find(`[data-testid="csv-requests"]`).AttrOr("href", ""); href != "/usage.csv?chart=requests" {
		t.Errorf("CSV link %q", href)
	}

	c.Series = []ChartSeries{{Name: "served", Values: []float64{0, 0, 0}}}
	c.Empty = "Nothing yet."
	empty := byTestID(t, render(t, ChartView(testPage("en", RoleViewer), c)), "chart-requests")
	if empty.Find(`[data-testid="chart-svg"]`).Length() != 0 || text(empty.Find(`[data-testid="chart-empty"]`)) != "Nothing yet." {
		t.Error("an empty chart draws an SVG or does not say it is empty")
	}
}

// TestChartTicks: the y axis steps by a round number, counts by whole ones, and
// every label carries the decimals its step needs and no more (no float noise such
// as 0.15000000000000002); large counts read in thousands or millions.
func TestChartTicks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		decimal bool
		values  []float64
		want    []string
	}{
		{"dollars", true, []float64{0.1, 0.05000000000000002}, []string{"0.20", "0.15", "0.10", "0.05", "0"}},
		{"cents", true, []float64{0.003}, []string{"0.004", "0.003", "0.002", "0.001", "0"}},
		{"one request", false, []float64{1}, []string{"4", "3", "2", "1", "0"}},
		{"requests", false, []float64{370, 12}, []string{"400", "300", "200", "100", "0"}},
		{"tokens", false, []float64{23610}, []string{"40k", "30k", "20k", "10k", "0"}},
		{"millions", false, []float64{1234567}, []string{"2.0M", "1.5M", "1.0M", "0.5M", "0"}},
	} {
		c := Chart{Decimal: tc.decimal, Labels: make([]string, len(tc.values)), Series: []ChartSeries{{Name: "s", Values: tc.values}}}
		if diff := cmp.Diff(tc.want, c.ticks()); diff != "" {
			t.Errorf("%s: ticks mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestChartXLabels: a label every few buckets, at an even step that divides the
// buckets, at most eight; every other one marked for a narrow chart to hide.
func TestChartXLabels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ n, labels, span int }{{7, 7, 1}, {15, 5, 3}, {24, 8, 3}, {60, 6, 10}, {30, 6, 5}, {13, 7, 2}} {
		c := Chart{Labels: make([]string, tc.n)}
		for i := range c.Labels {
			c.Labels[i] = strconv.Itoa(i)
		}
		var got []string
		for _, xl := range c.xLabels() {
			if xl.Label != "" {
				got = append(got, xl.Label)
			}
		}
		if len(got) != tc.labels || c.labelSpan() != tc.span || got[1] != strconv.Itoa(tc.span) {
			t.Errorf("%d buckets: labels %v (span %d), want %d labels %d apart", tc.n, got, c.labelSpan(), tc.labels, tc.span)
		}
	}
}

// TestChartCells: a table cell (and a CSV cell) of dollars reads to the micro-dollar,
// without the float noise of a sum (0.1 + 0.05 is 0.15000000000000002).
func TestChartCells(t *testing.T) {
	t.Parallel()
	c := Chart{Decimal: true, Labels: []string{"a"}, Series: []ChartSeries{{Name: "s", Values: []float64{0.1 + 0.05}}}}
	if got := c.Cell(c.Series[0], 0); got != "0.15" {
		t.Errorf("cell %q, want 0.15", got)
	}
}
