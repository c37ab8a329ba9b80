package limits

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// ParseModelList reads the dashboard's models textarea of a client key: one
// entry a line ("provider/model", a bare upstream id or "provider/*"), white
// space trimmed, blank lines ignored. Every bad entry is reported with its
// line number, and an entry given twice is an error on the later line. On
// any error the list is nil and nothing may be saved; text with no entries
// gives nil and no errors (all models). The number of entries is left to
// DecodeClientKeyLimits, which reports a list over MaxKeyModels on the field.
func ParseModelList(text string) ([]string, []LineError) {
	var (
		r      textReport[struct{}]
		models []string
	)
	for lineNo, entry := range textEntries(text, "") {
		if !validModelPattern(entry) {
			r.fail(lineNo, entry, "", describe(tagModelPattern, "", reflect.String))
			continue
		}
		if prev, dup := r.seen(entry, lineNo); dup {
			r.fail(lineNo, entry, "", newMessage(CodeDuplicateListed, "model %q is already listed on line %d", entry, prev))
			continue
		}
		models = append(models, entry)
	}
	if len(r.errs) > 0 {
		return nil, r.errs
	}
	return models, nil
}

// FormatModelList writes a models list as ParseModelList reads it: one entry
// a line, in the stored order (the order is the operator's), no trailing
// newline. ParseModelList(FormatModelList(m)) gives m back for every valid
// list without repeats.
func FormatModelList(models []string) string { return strings.Join(models, "\n") }

// ApplyClientKeyForm applies the dashboard's client-key limit fields to base
// and returns the result, strictly checked, with ApplyForm's rules: form
// fields carry the JSON names (ClientKeyLimitKeys); a field absent from the
// form leaves its key as it is in base, a field present but blank removes
// its key (weight then falls back to DefaultWeight); numbers follow the
// JSON rules; priority is a class's name. models is the one-entry-a-line textarea (ParseModelList),
// whose bad lines are reported on the models path with Code CodeLine and the
// LineError as the one argument. Every problem is reported with its path
// under pathPrefix ("limits.weight"); on any problem the result is the zero
// value.
func ApplyClientKeyForm(base ClientKeyLimits, form url.Values, pathPrefix string) (ClientKeyLimits, FieldErrors) {
	members := map[string]json.RawMessage{}
	if doc, err := json.Marshal(base); err != nil || json.Unmarshal(doc, &members) != nil {
		// ClientKeyLimits holds only pointers to ints and a string slice.
		return ClientKeyLimits{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
	}
	var errs FieldErrors
	for _, key := range ClientKeyLimitKeys() {
		text, present := formText(form, key)
		if !present {
			continue
		}
		if text == "" {
			delete(members, key)
			continue
		}
		if key == KeyPriority {
			raw, err := json.Marshal(text) // a string: the decoder checks the name
			if err != nil {
				return ClientKeyLimits{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
			}
			members[key] = raw
			continue
		}
		if key != KeyModels {
			members[key] = formNumber(text)
			continue
		}
		models, lineErrs := ParseModelList(text)
		for _, le := range lineErrs {
			errs = append(errs, FieldError{
				Field: joinPath(pathPrefix, []string{key}), Message: le.Error(), Code: CodeLine, Args: []any{le},
			})
		}
		delete(members, key)
		if models != nil {
			raw, err := json.Marshal(models)
			if err != nil {
				return ClientKeyLimits{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
			}
			members[key] = raw
		}
	}
	merged, err := json.Marshal(members)
	if err != nil {
		return ClientKeyLimits{}, FieldErrors{plainMessage(CodeInvalid).fieldError(pathPrefix)}
	}
	l, decodeErrs := DecodeClientKeyLimits(merged, pathPrefix)
	if errs = append(errs, decodeErrs...); len(errs) > 0 {
		return ClientKeyLimits{}, SortFieldErrors(errs)
	}
	return l, nil
}

// formText is the trimmed text of form field key, and whether the form has the
// field at all (a field left out keeps the stored value; a blank one removes it).
func formText(form url.Values, key string) (string, bool) {
	values, present := form[key]
	if !present || len(values) == 0 {
		return "", present
	}
	return strings.TrimSpace(values[0]), true
}

// formNumber is a form's number text as a JSON member: the literal itself
// when it is a number, else a JSON string, which the decoder rejects with the
// field's own range message ("must be a whole number from 1 to 1000").
func formNumber(text string) json.RawMessage {
	if _, res := parseWhole(text); res == wholeNotNum {
		text = strconv.Quote(text)
	}
	return json.RawMessage(text)
}
