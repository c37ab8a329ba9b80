package limits

import (
	"fmt"
	"iter"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// LineError is one bad entry of a dashboard textarea (the model=cap text,
// the per-provider lines), with its 1-based line number and the entry as
// typed (trimmed). Key names the part of the entry the problem is about
// ("maxWaitMs") when it is not the whole entry; Message is in English and
// starts with Key when there is one. Code and Args name the problem for a
// translation, as in FieldError (without Key).
type LineError struct {
	Line    int    `json:"line"`
	Entry   string `json:"entry"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
	Code    string `json:"-"`
	Args    []any  `json:"-"`
}

// Error reads like `line 2: "glm-5=0": cap must be a whole number from 1 to 10000`.
func (e LineError) Error() string {
	return fmt.Sprintf("line %d: %q: %s", e.Line, e.Entry, e.Message)
}

// LineErrors is every bad entry of one text, in line order.
type LineErrors []LineError

// Error joins the entries' messages, one per line.
func (le LineErrors) Error() string {
	msgs := make([]string, len(le))
	for i, e := range le {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// ParseModelCaps reads the dashboard's per-model caps text: one model=cap a
// line, commas also separating entries ("glm-5=1, glm-4.7=3"). White space
// around entries, names and caps is trimmed; blank lines and empty entries
// are ignored. A model name is 1 to 128 characters with no white space,
// control characters, '=' or ','; a cap is a whole number from 1 to 10000.
// Every bad entry is reported with its line number, a model named twice
// is an error on the later line, and text capping more than MaxModelCaps
// models is an error on the line of the first model too many. On any error the map is nil and nothing
// may be saved; text with no entries gives a nil map and no errors.
func ParseModelCaps(text string) (map[string]int, []LineError) {
	var (
		r       textReport[int]
		tooMany bool
	)
	for lineNo, entry := range textEntries(text, ",") {
		fail := func(m message) { r.fail(lineNo, entry, "", m) }
		name, capText, ok := strings.Cut(entry, "=")
		if !ok {
			fail(newMessage(CodeLineShape, "expected model=cap, like glm-5=2"))
			continue
		}
		name, capText = strings.TrimSpace(name), strings.TrimSpace(capText)
		nameOK := validModelKey(name)
		switch {
		case name == "":
			fail(newMessage(CodeModelMissing, "model name is missing before '='"))
		case !nameOK:
			fail(describe(tagModelKey, "", reflect.String))
		}
		if nameOK {
			if prev, dup := r.seen(name, lineNo); dup {
				fail(newMessage(CodeDuplicateModel, "model %q is already capped on line %d", name, prev))
				nameOK = false
			}
		}
		n, res := parseWhole(capText)
		if res != wholeOK || n < MinCap || n > MaxCap {
			fail(describe(tagCap, capRange, reflect.Int))
			continue
		}
		if nameOK {
			if len(r.values) == MaxModelCaps {
				// Once, on the first entry past the limit: 40 000 lines must not
				// make 39 500 errors.
				if !tooMany {
					fail(newMessage(CodeTooManyModels, "at most %d models can be capped on one connection", MaxModelCaps))
				}
				tooMany = true
				continue
			}
			r.set(name, int(n))
		}
	}
	return r.result()
}

// textEntries yields every entry of a textarea's text with its 1-based line:
// each line split at sep ("" for none), every part trimmed, empty parts left
// out.
func textEntries(text, sep string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		for i, line := range strings.Split(text, "\n") {
			parts := []string{line}
			if sep != "" {
				parts = strings.Split(line, sep)
			}
			for _, entry := range parts {
				if entry = strings.TrimSpace(entry); entry != "" && !yield(i+1, entry) {
					return
				}
			}
		}
	}
}

// textReport is what a textarea codec has read so far: the accepted entries,
// the bad ones, and the line each key was first given on.
type textReport[V any] struct {
	values map[string]V
	errs   []LineError
	first  map[string]int
}

// fail records a bad entry; key names the part of it m is about ("" for the
// whole entry) and starts the English message.
func (r *textReport[V]) fail(line int, entry, key string, m message) {
	msg := m.text
	if key != "" {
		msg = key + " " + msg
	}
	r.errs = append(r.errs, LineError{Line: line, Entry: entry, Key: key, Message: msg, Code: m.code, Args: m.args})
}

// seen records that key is given on line and reports the line it was first
// given on, if an earlier one.
func (r *textReport[V]) seen(key string, line int) (first int, dup bool) {
	if first, dup = r.first[key]; dup {
		return first, true
	}
	if r.first == nil {
		r.first = map[string]int{}
	}
	r.first[key] = line
	return 0, false
}

// set accepts key's value.
func (r *textReport[V]) set(key string, v V) {
	if r.values == nil {
		r.values = map[string]V{}
	}
	r.values[key] = v
}

// result is the codec's answer: the values and no errors, or nil and every
// error (a nil map for text with no entries).
func (r *textReport[V]) result() (map[string]V, []LineError) {
	if len(r.errs) > 0 {
		return nil, r.errs
	}
	return r.values, nil
}

// capRange is the cap rule's parameter, as in the Overrides validate tag
// (MinCap:MaxCap; a test keeps them in step).
const capRange = "1:10000"

// FormatModelCaps writes caps as ParseModelCaps reads them: one model=cap a
// line, models sorted, lines joined by "\n" with no trailing newline; an
// empty map gives "". For every map ParseModelCaps accepts,
// ParseModelCaps(FormatModelCaps(m)) gives m back, and FormatModelCaps of a
// parsed text is its canonical form.
func FormatModelCaps(caps map[string]int) string {
	return formatLines(caps, func(name string, c int) string { return name + "=" + strconv.Itoa(c) })
}

// formatLines writes one line a map entry, keys sorted, joined by "\n" with no
// trailing newline: the layout of every textarea codec in this package.
func formatLines[V any](m map[string]V, line func(key string, v V) string) string {
	keys := slices.Sorted(maps.Keys(m))
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = line(k, m[k])
	}
	return strings.Join(lines, "\n")
}
