package limits

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// LineError is one bad entry of the model=cap text, with its 1-based line
// number and the entry as typed (trimmed). Message is in English; Code and
// Args name the problem for a translation, as in FieldError.
type LineError struct {
	Line    int    `json:"line"`
	Entry   string `json:"entry"`
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
// Every bad entry is reported with its line number, and a model named twice
// is an error on the later line. On any error the map is nil and nothing
// may be saved; text with no entries gives a nil map and no errors.
func ParseModelCaps(text string) (map[string]int, []LineError) {
	var (
		caps  map[string]int
		errs  []LineError
		first = map[string]int{} // model → line it first appeared on
	)
	for i, line := range strings.Split(text, "\n") {
		lineNo := i + 1
		for entry := range strings.SplitSeq(line, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			fail := func(m message) {
				errs = append(errs, LineError{Line: lineNo, Entry: entry, Message: m.text, Code: m.code, Args: m.args})
			}
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
				if prev, dup := first[name]; dup {
					fail(newMessage(CodeDuplicateModel, "model %q is already capped on line %d", name, prev))
					nameOK = false
				} else {
					first[name] = lineNo
				}
			}
			n, res := parseWhole(capText)
			if res != wholeOK || n < MinCap || n > MaxCap {
				fail(describe(tagCap, capRange, reflect.Int))
				continue
			}
			if nameOK {
				if caps == nil {
					caps = map[string]int{}
				}
				caps[name] = int(n)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return caps, nil
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
	names := make([]string, 0, len(caps))
	for name := range caps {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, name := range names {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(caps[name]))
	}
	return b.String()
}
