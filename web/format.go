package web

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// NoCap is how an absent cap or limit is written: "0 / –".
const NoCap = "–"

// Ms formats a count of milliseconds with its unit: Ms(300000) = "300000 ms".
func Ms(ms int64) string { return strconv.FormatInt(ms, 10) + " ms" }

// CapText writes a cap: the number, or NoCap for 0 (no cap).
func CapText(c int) string {
	if c <= 0 {
		return NoCap
	}
	return strconv.Itoa(c)
}

// Ratio writes in-flight against cap: Ratio(3, 4) = "3 / 4", Ratio(0, 0) = "0 / –".
func Ratio(inFlight, c int) string { return strconv.Itoa(inFlight) + " / " + CapText(c) }

// CapsSummary summarises a connection's concurrency caps for a list:
// CapsSummary(4, {"glm-5": 1, "glm-4.7": 3}) = "4 · glm-4.7=3 glm-5=1"; the
// connection cap is NoCap when 0 and the model part is left out when empty.
func CapsSummary(maxConcurrent int, modelCaps map[string]int) string {
	var b strings.Builder
	b.WriteString(CapText(maxConcurrent))
	if len(modelCaps) == 0 {
		return b.String()
	}
	models := make([]string, 0, len(modelCaps))
	for m := range modelCaps {
		models = append(models, m)
	}
	sort.Strings(models)
	b.WriteString(" ·")
	for _, m := range models {
		b.WriteString(" " + m + "=" + strconv.Itoa(modelCaps[m]))
	}
	return b.String()
}

// decimalSep and groupSep are the locale's decimal and thousands separators.
func (l *Localizer) decimalSep() string {
	if l.Tag() == "pt-BR" {
		return ","
	}
	return "."
}

func (l *Localizer) groupSep() string {
	if l.Tag() == "pt-BR" {
		return "."
	}
	return ","
}

// Int writes n with the locale's thousands separator: 1234567 = "1,234,567" in
// English, "1.234.567" in Brazilian Portuguese. Numbers below 10000 are not grouped.
func (l *Localizer) Int(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) <= 4 {
		if neg {
			return "-" + s
		}
		return s
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	first := len(s) % 3
	if first == 0 {
		first = 3
	}
	b.WriteString(s[:first])
	for i := first; i < len(s); i += 3 {
		b.WriteString(l.groupSep())
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// Decimal writes f with one decimal in the locale's notation: 1.8 → "1.8" / "1,8".
func (l *Localizer) Decimal(f float64) string {
	s := strconv.FormatFloat(math.Round(f*10)/10, 'f', 1, 64)
	return strings.Replace(s, ".", l.decimalSep(), 1)
}

// Duration writes a wait or a countdown for humans: "0.4 s", "1.8 s" below 10 s,
// "12 s" below 100 s, then "3 min" and "2 h". Negative durations are written as 0.
func (l *Localizer) Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < 10*time.Second:
		return l.Decimal(d.Seconds()) + " s"
	case d < 100*time.Second:
		return strconv.Itoa(int(math.Round(d.Seconds()))) + " s"
	case d < 100*time.Minute:
		return strconv.Itoa(int(math.Round(d.Minutes()))) + " min"
	default:
		return strconv.Itoa(int(math.Round(d.Hours()))) + " h"
	}
}

// DateTime writes an absolute time in UTC: "2026-03-01 14:05 UTC" in English,
// "01/03/2026 14:05 UTC" in Brazilian Portuguese.
func (l *Localizer) DateTime(t time.Time) string {
	if l.Tag() == "pt-BR" {
		return t.UTC().Format("02/01/2006 15:04 MST")
	}
	return t.UTC().Format("2006-01-02 15:04 MST")
}

// DateTimeSeconds is DateTime to the second, for a list whose rows can be
// seconds apart.
func (l *Localizer) DateTimeSeconds(t time.Time) string {
	if l.Tag() == "pt-BR" {
		return t.UTC().Format("02/01/2006 15:04:05 MST")
	}
	return t.UTC().Format("2006-01-02 15:04:05 MST")
}

// Ago writes how long before now t was: "just now", "3 min ago", "2 h ago", then the
// date for anything older than two days.
func (l *Localizer) Ago(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return l.T("time.justNow")
	case d < time.Hour:
		return l.T("time.ago", strconv.Itoa(int(d.Minutes()))+" min")
	case d < 48*time.Hour:
		return l.T("time.ago", strconv.Itoa(int(d.Hours()))+" h")
	default:
		return l.DateTime(t)
	}
}

// percent is value/max as a CSS percentage clamped to 0–100, written with at most one
// decimal ("75%", "33.3%").
func percent(value, max int) string {
	if max <= 0 || value <= 0 {
		return "0%"
	}
	p := float64(value) * 100 / float64(max)
	if p > 100 {
		p = 100
	}
	return strconv.FormatFloat(math.Round(p*10)/10, 'f', -1, 64) + "%"
}
