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

// Chart geometry. The plot is drawn in a 100 × 100 viewBox stretched to the box the
// stylesheet gives it (preserveAspectRatio="none"), so a bar's x and width are
// percentages of the plot's width and its y and height percentages of its height;
// every word and number (the unit, the ticks, the labels) is HTML beside the plot, so
// its size is the stylesheet's at every width rather than the SVG's scale.
const (
	chartMaxSeries = 8
	chartTks       = 4 // intervals of the y axis: chartTks+1 ticks, evenly spaced
	chartMaxLabels = 8 // x labels at most (the stylesheet hides every other one on a phone)
)

// chartBar is one drawn rectangle, in percent of the plot.
type chartBar struct {
	X, Y, W, H float64
	Series     int
	Title      string // its label, series and value (a tooltip and for screen readers)
}

// chartXLabel is what goes under one bucket: its label, or "" when the bucket is
// not labelled (labels would crowd); Alt marks every other label, which a narrow
// chart hides.
type chartXLabel struct {
	Label string
	Alt   bool
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

// step is the distance between two ticks: a "nice" number (1, 2 or 5 × 10^n, or 25,
// 250, …) with chartTks of them covering top. Counts (not Decimal) step by whole
// numbers.
func (c Chart) step() float64 {
	top := c.top()
	if top <= 0 {
		top = 1
	}
	raw := top / chartTks
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		st := m * p
		if (m == 2.5 && st < 10) || (!c.Decimal && (st < 1 || st != math.Trunc(st))) {
			continue // 2.5, 0.25, … would add a decimal to every label
		}
		if st*chartTks >= top*(1-1e-9) {
			return st
		}
	}
	return max(10*p, 1)
}

// scale is the axis maximum.
func (c Chart) scale() float64 { return c.step() * chartTks }

func (c Chart) bars() []chartBar {
	n := len(c.Labels)
	if n == 0 {
		return nil
	}
	scale := c.scale()
	slot := 100 / float64(n)
	w := slot * 0.7
	if n > 30 {
		w = slot * 0.8
	}
	var out []chartBar
	for i, label := range c.Labels {
		base := 0.0
		x := float64(i)*slot + (slot-w)/2
		for si, s := range c.Series {
			if i >= len(s.Values) || s.Values[i] <= 0 {
				continue
			}
			h := s.Values[i] / scale * 100
			y := 100 - base - h
			out = append(out, chartBar{X: round3(x), Y: round3(y), W: round3(w), H: round3(h), Series: si % chartMaxSeries,
				Title: label + " · " + s.Name + ": " + c.format(s.Values[i]) + " " + c.Unit})
			base += h
		}
	}
	return out
}

// ticks is the y axis' labels, top first.
func (c Chart) ticks() []string {
	st := c.step()
	out := make([]string, 0, chartTks+1)
	for i := chartTks; i >= 0; i-- {
		out = append(out, c.tickLabel(float64(i)*st, st))
	}
	return out
}

// gridLines is where the y axis' lines are, in percent of the plot's height from its top.
func gridLines() []float64 {
	out := make([]float64, 0, chartTks+1)
	for i := 0; i <= chartTks; i++ {
		out = append(out, float64(i)*100/chartTks)
	}
	return out
}

// tickLabel writes v, a multiple of step, with as many decimals as step needs and no
// more ("0.15", never "0.15000000000000002"); large counts in thousands or millions
// ("250k", "1.5M") so the axis stays narrow.
func (c Chart) tickLabel(v, step float64) string {
	div, suffix := 1.0, ""
	switch top := step * chartTks; {
	case top >= 1e6:
		div, suffix = 1e6, "M"
	case top >= 1e4:
		div, suffix = 1e3, "k"
	}
	if v == 0 {
		return "0"
	}
	v, step = v/div, step/div
	dec := 0
	for dec < 6 && math.Abs(step*math.Pow(10, float64(dec))-math.Round(step*math.Pow(10, float64(dec)))) > 1e-9 {
		dec++
	}
	return strconv.FormatFloat(v, 'f', dec, 64) + suffix
}

// labelSpan is how many buckets one x label stands for: 1 up to chartMaxLabels
// buckets; else the smallest divisor of the bucket count that leaves at most
// chartMaxLabels labels (so labels fall at even steps), or the plain quotient
// rounded up when no divisor does.
func (c Chart) labelSpan() int {
	n := len(c.Labels)
	if n <= chartMaxLabels {
		return 1
	}
	span := (n + chartMaxLabels - 1) / chartMaxLabels
	for d := span; d <= n/2; d++ {
		if n%d == 0 {
			return d
		}
	}
	return span
}

// xLabels is one entry per bucket: a label every labelSpan buckets, "" between.
func (c Chart) xLabels() []chartXLabel {
	span := c.labelSpan()
	out := make([]chartXLabel, len(c.Labels))
	for i, l := range c.Labels {
		if i%span == 0 {
			out[i] = chartXLabel{Label: l, Alt: (i/span)%2 == 1}
		}
	}
	return out
}

// format writes a value for a tick, a tooltip or the table.
func (c Chart) format(v float64) string {
	if c.Decimal { // to the micro-dollar: sums of dollars carry float noise below it
		return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
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

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func seriesClass(i int) string { return "series-" + strconv.Itoa(i%chartMaxSeries) }
