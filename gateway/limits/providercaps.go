package limits

import (
	"reflect"
	"strconv"
	"strings"
)

// The settings page's per-provider textarea codec. Its ranges are read from
// the validate tags of ProviderSettings, so the page accepts exactly what
// PATCH /api/v1/settings accepts (a provider maxConcurrent of 20000 set
// through the API can be saved back from the page).

// providerRange returns the "lo:hi" of a ProviderSettings field's between
// rule, named by its JSON name.
func providerRange(jsonName string) string {
	t := reflect.TypeFor[ProviderSettings]()
	for i := range t.NumField() {
		f := t.Field(i)
		if fieldName(f) != jsonName {
			continue
		}
		for rule := range strings.SplitSeq(f.Tag.Get("validate"), ",") {
			if param, ok := strings.CutPrefix(rule, tagBetween+"="); ok {
				return param
			}
		}
	}
	panic("limits: ProviderSettings has no between rule for " + jsonName)
}

// The ranges of the two numbers on a provider line, from ProviderSettings.
var (
	providerMaxConcurrentRange = providerRange(KeyMaxConcurrent)
	providerMaxWaitMsRange     = providerRange(KeyMaxWaitMs)
)

// ParseProviderCaps reads the settings page's per-provider textarea: one
// "provider maxConcurrent [maxWaitMs]" a line, spaces or tabs between; blank
// lines and lines starting with # are ignored. The provider matches
// [a-z0-9-]{1,32}; the numbers are whole (JSON spellings such as 1e3 too) and
// in the ranges of ProviderSettings, as DecodeSettings checks them. Every bad
// line is reported with its number (its first problem), not only the first
// line; a provider listed twice is an error on the later line. On any error
// the map is nil; text with no entries gives a nil map and no errors. Every entry has MaxConcurrent
// set; MaxWaitMs is set only when the line gives it.
func ParseProviderCaps(text string) (map[string]ProviderSettings, []LineError) {
	var r textReport[ProviderSettings]
	for lineNo, line := range textEntries(text, "") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			r.fail(lineNo, line, "", newMessage(CodeProviderLineShape, "write provider, maxConcurrent and optionally maxWaitMs, separated by spaces"))
			continue
		}
		name := f[0]
		if !validProviderKey(name) {
			r.fail(lineNo, line, "", describe(tagProviderKey, "", reflect.String))
			continue
		}
		if prev, dup := r.seen(name, lineNo); dup {
			r.fail(lineNo, line, "", newMessage(CodeDuplicateProvider, "provider %q is already listed on line %d", name, prev))
			continue
		}
		if ps, ok := providerNumbers(&r, lineNo, line, f[1:]); ok {
			r.set(name, ps)
		}
	}
	return r.result()
}

// providerNumbers reads a provider line's maxConcurrent and optional
// maxWaitMs, reporting the first that is not a whole number in its range.
func providerNumbers(r *textReport[ProviderSettings], lineNo int, line string, nums []string) (ProviderSettings, bool) {
	var ps ProviderSettings
	for i, text := range nums {
		key, rng, dst := KeyMaxConcurrent, providerMaxConcurrentRange, &ps.MaxConcurrent
		if i == 1 {
			key, rng, dst = KeyMaxWaitMs, providerMaxWaitMsRange, &ps.MaxWaitMs
		}
		lo, hi, _ := parseRange(rng)
		n, res := parseWhole(text)
		if res != wholeOK || n < lo || n > hi {
			r.fail(lineNo, line, key, describe(tagBetween, rng, reflect.Int))
			return ProviderSettings{}, false
		}
		*dst = new(int(n))
	}
	return ps, true
}

// FormatProviderCaps writes providers as ParseProviderCaps reads them: one
// "provider maxConcurrent [maxWaitMs]" a line, providers sorted, lines joined
// by "\n" with no trailing newline. An absent maxConcurrent is written as 0
// (the same: no cap); maxWaitMs is written when set. For every map
// ParseProviderCaps returns, ParseProviderCaps(FormatProviderCaps(m)) gives m
// back, and FormatProviderCaps of a parsed text is its canonical form.
func FormatProviderCaps(providers map[string]ProviderSettings) string {
	return formatLines(providers, func(name string, ps ProviderSettings) string {
		line := name + " " + strconv.Itoa(valueOr(ps.MaxConcurrent, 0))
		if ps.MaxWaitMs != nil {
			line += " " + strconv.Itoa(*ps.MaxWaitMs)
		}
		return line
	})
}

// ApplyProviderCaps reads the per-provider textarea over the stored
// providers: a line that says what its stored entry already means keeps the
// entry as stored (so an entry set through the API with only maxWaitMs, shown
// as "p 0 5000", is not rewritten by a save of an unchanged page). The
// errors are ParseProviderCaps'; on any, the map is nil.
func ApplyProviderCaps(stored map[string]ProviderSettings, text string) (map[string]ProviderSettings, []LineError) {
	caps, errs := ParseProviderCaps(text)
	if errs != nil {
		return nil, errs
	}
	for name, ps := range caps {
		old, ok := stored[name]
		if ok && FormatProviderCaps(map[string]ProviderSettings{name: old}) == FormatProviderCaps(map[string]ProviderSettings{name: ps}) {
			caps[name] = ProviderSettings{MaxConcurrent: clonePtr(old.MaxConcurrent), MaxWaitMs: clonePtr(old.MaxWaitMs)}
		}
	}
	return caps, nil
}
