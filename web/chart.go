package web

import (
	"math"
	"strconv"
)

// Chart is a bar chart drawn on the server as SVG: one bar (or one stack of
// bars, one per series) per label, a y axis with its unit, a legend, a title and
// a description for screen readers, and the numbers as a table beside it. Values
// are already in the unit (requests, tokens, dollars).
type Chart struct {
	ID      string // data-testid and element ids: "chart-<ID>"
	Title   string
	Desc    string // what the chart shows, in a sentence, for screen readers
	Unit    string // the y axis' unit ("requests", "tokens", "USD")
	Labels  []string
	Series  []ChartSeries
	CSVURL  string // the chart's data as CSV
	Empty   string // shown instead of the chart when there is nothing to draw
	Decimal bool   // values are fractional (dollars): tick labels keep decimals
}

// ChartSeries is one stacked series: Values[i] belongs to Labels[i].
type ChartSeries struct {
	Name   string
	Values []float64
}

// Chart geometry (viewBox units).
const (
	chartW, chartH           = 640, 240
	chartLeft, chartRight    = 64, 8
	chartTop, chartBottom    = 12, 40
	chartPlotW, chartPlotH   = chartW - chartLeft - chartRight, chartH - chartTop - chartBottom
	chartMaxSeries, chartTks = 8, 4
)

// chartBar is one drawn rectangle.
type chartBar struct {
	X, Y, W, H float64
	Series     int
	Title      string // its label, series and value (a tooltip and for screen readers)
}

// chartTick is one labelled line of the y axis.
type chartTick struct {
	Y     float64
	Label string
}

// chartXLabel is a label under the x axis (some are skipped when they would crowd).
type chartXLabel struct {
	X     float64
	Label string
}

// isEmpty reports whether the chart has nothing above zero.
func (c Chart) isEmpty() bool { return c.top() == 0 }

// top is the largest stack.
func (c Chart) top() float64 {
	m := 0.0
	for i := range c.Labels {
		sum := 0.0
		for _, s := range c.Series {
			if i < len(s.Values) {
				sum += max(s.Values[i], 0)
			}
		}
		m = max(m, sum)
	}
	return m
}

// scale is the axis maximum: top rounded up to a "nice" number (1, 2 or 5 × 10^n).
func (c Chart) scale() float64 {
	top := c.top()
	if top <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(top)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= top {
			return m * p
		}
	}
	return 10 * p
}

func (c Chart) bars() []chartBar {
	n := len(c.Labels)
	if n == 0 {
		return nil
	}
	scale := c.scale()
	slot := float64(chartPlotW) / float64(n)
	w := max(slot*0.7, 1)
	var out []chartBar
	for i, label := range c.Labels {
		base := 0.0
		x := chartLeft + float64(i)*slot + (slot-w)/2
		for si, s := range c.Series {
			if i >= len(s.Values) || s.Values[i] <= 0 {
				continue
			}
			h := s.Values[i] / scale * chartPlotH
			y := chartTop + chartPlotH - base - h
			out = append(out, chartBar{X: round2(x), Y: round2(y), W: round2(w), H: round2(h), Series: si % chartMaxSeries,
				Title: label + " · " + s.Name + ": " + c.format(s.Values[i]) + " " + c.Unit})
			base += h
		}
	}
	return out
}

func (c Chart) ticks() []chartTick {
	scale := c.scale()
	out := make([]chartTick, 0, chartTks+1)
	for i := 0; i <= chartTks; i++ {
		v := scale * float64(i) / chartTks
		out = append(out, chartTick{Y: round2(chartTop + chartPlotH - float64(i)/chartTks*chartPlotH), Label: c.format(v)})
	}
	return out
}

func (c Chart) xLabels() []chartXLabel {
	n := len(c.Labels)
	if n == 0 {
		return nil
	}
	slot := float64(chartPlotW) / float64(n)
	every := max(1, int(math.Ceil(float64(n)/8))) // at most about 8 labels
	var out []chartXLabel
	for i := 0; i < n; i += every {
		out = append(out, chartXLabel{X: round2(chartLeft + float64(i)*slot + slot/2), Label: c.Labels[i]})
	}
	return out
}

// format writes a value for a tick, a tooltip or the table.
func (c Chart) format(v float64) string {
	if c.Decimal {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
}

// Cell is the value of series s at label i as the table and the CSV write it.
func (c Chart) Cell(s ChartSeries, i int) string {
	if i >= len(s.Values) {
		return "0"
	}
	return c.format(s.Values[i])
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func seriesClass(i int) string { return "series-" + strconv.Itoa(i%chartMaxSeries) }
