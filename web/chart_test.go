package web

import (
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
	svg.Find("g.chart-axis > text[text-anchor=end]").Each(func(_ int, s *goquery.Selection) { ticks = append(ticks, s.Text()) })
	if diff := cmp.Diff([]string{"0", "3", "5", "8", "10"}, ticks); diff != "" {
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
