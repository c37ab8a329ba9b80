package limits

import (
	"reflect"
	"strings"
)

// The settings page's prices textarea: one price a line,
//
//	pattern input output [cachedInput [cacheWrite]]
//
// in US dollars per million tokens, spaces or tabs between; "-" leaves a
// price absent (input and output: 0; cachedInput: input; cacheWrite: 1.25 ×
// input). Blank lines and lines starting with # are ignored.

// KeyPrices is the settings key of the prices map.
const KeyPrices = "prices"

// absentPrice is how the textarea writes a price that is not set.
const absentPrice = "-"

// priceColumns names the numbers of a prices line, in order.
var priceColumns = [...]string{"input", "output", "cachedInput", "cacheWrite"}

// ParsePrices reads the prices textarea. The pattern is a model pattern as
// in a client key's models (provider/model, a bare id or provider/*); each
// number a price in dollars from 0 to 10000 with at most 6 decimals, as
// DecodeSettings checks it, or "-". Every bad line is reported with its
// number (its first problem), not only the first line: a line with fewer
// than 3 or more than 5 fields, a bad pattern, a bad price (naming its
// column), a pattern given twice (on the later line), and text with more than
// MaxPrices patterns (once, on the first line too many). On any error the
// map is nil; text with no entries gives a nil map and no errors.
func ParsePrices(text string) (Prices, []LineError) {
	var (
		r       textReport[Price]
		tooMany bool
	)
	for lineNo, line := range textEntries(text, "") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 || len(f) > 1+len(priceColumns) {
			r.fail(lineNo, line, "", newMessage(CodePriceLineShape, "write a model pattern, then the input and output prices and optionally cachedInput and cacheWrite, separated by spaces (- for a price not set)"))
			continue
		}
		pattern := f[0]
		if !validModelPattern(pattern) {
			r.fail(lineNo, line, "", describe(tagModelPattern, "", reflect.String))
			continue
		}
		if prev, dup := r.seen(pattern, lineNo); dup {
			r.fail(lineNo, line, "", newMessage(CodeDuplicatePrice, "model pattern %q is already priced on line %d", pattern, prev))
			continue
		}
		p, ok := priceNumbers(&r, lineNo, line, f[1:])
		if !ok {
			continue
		}
		if len(r.values) == MaxPrices {
			if !tooMany {
				r.fail(lineNo, line, "", newMessage(CodeTooManyPrices, "at most %d model patterns can be priced", MaxPrices))
			}
			tooMany = true
			continue
		}
		r.set(pattern, p)
	}
	ps, errs := r.result()
	return Prices(ps), errs
}

// priceNumbers reads a prices line's numbers, reporting the first that is
// not a price.
func priceNumbers(r *textReport[Price], lineNo int, line string, nums []string) (Price, bool) {
	var p Price
	dst := [...]**Micros{&p.Input, &p.Output, &p.CachedInput, &p.CacheWrite}
	for i, text := range nums {
		if text == absentPrice {
			continue
		}
		m, ok := ParseUSD(text)
		if !ok || m < 0 || m > MaxPrice {
			r.fail(lineNo, line, priceColumns[i], usdMessage())
			return Price{}, false
		}
		*dst[i] = &m
	}
	return p, true
}

// FormatPrices writes prices as ParsePrices reads them: one "pattern input
// output cachedInput cacheWrite" a line, patterns sorted, "-" for a price
// not set, lines joined by "\n" with no trailing newline. For every map
// ParsePrices returns, ParsePrices(FormatPrices(m)) gives m back, and
// FormatPrices of a parsed text is its canonical form.
func FormatPrices(p Prices) string {
	return formatLines(p, func(pattern string, pr Price) string {
		var b strings.Builder
		b.WriteString(pattern)
		for _, m := range [...]*Micros{pr.Input, pr.Output, pr.CachedInput, pr.CacheWrite} {
			b.WriteByte(' ')
			if m == nil {
				b.WriteString(absentPrice)
			} else {
				b.WriteString(m.String())
			}
		}
		return b.String()
	})
}
