package limits

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-playground/validator/v10"
)

// FieldError is one problem with one field of a written document. Field is
// a dotted path such as "rateLimitOverrides.modelConcurrency.glm-5"; Message
// says in plain words what is wrong and how to fix it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// FieldErrors is every problem found in one document, sorted by field and
// then message. A nil or empty FieldErrors means the document is valid; use
// it as an error only when it is non-empty.
type FieldErrors []FieldError

// Error joins the problems into one line: "field: message; field: message".
func (fe FieldErrors) Error() string {
	var b strings.Builder
	for i, e := range fe {
		if i > 0 {
			b.WriteString("; ")
		}
		if e.Field != "" {
			b.WriteString(e.Field)
			b.WriteString(": ")
		}
		b.WriteString(e.Message)
	}
	return b.String()
}

// sortFieldErrors orders problems deterministically and drops exact repeats.
func sortFieldErrors(fe FieldErrors) FieldErrors {
	slices.SortFunc(fe, func(a, b FieldError) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
	})
	return slices.Compact(fe)
}

// Messages for problems the decoders find before validation runs.
const (
	msgUnknownField   = "unknown field"
	msgDuplicateField = "duplicate field; give each key once"
	msgNotJSON        = "is not valid JSON"
	msgNotObject      = "must be a JSON object"
	msgNotModelMap    = `must be an object of model names to caps, like {"glm-5": 2}`
	msgNotProviderMap = `must be an object of provider names to settings, like {"openai": {"maxConcurrent": 8}}`
	msgNotWhole       = "must be a whole number"
)

// describe is the one table of validation messages: it turns a rule (a
// validator tag and its parameter) into plain words. The validator's errors
// and the decoders' own type errors both go through it, so the same rule
// always reads the same.
func describe(tag, param string, kind reflect.Kind) string {
	lo, hi, isRange := strings.Cut(param, ":")
	switch tag {
	case tagBetween:
		if kind == reflect.String {
			return fmt.Sprintf("must be %s to %s characters long", lo, hi)
		}
		if isRange {
			return fmt.Sprintf("must be a whole number from %s to %s", lo, hi)
		}
	case tagCap:
		return fmt.Sprintf("cap must be a whole number from %s to %s", lo, hi)
	case tagModelKey:
		return fmt.Sprintf("model name must be 1 to %d characters, with no spaces, '=' or ','", MaxModelKeyLen)
	case tagProviderKey:
		return fmt.Sprintf("provider name must be 1 to %d characters of a-z, 0-9 and '-'", maxProviderKeyLen)
	case "required", "required_if", "required_unless", "required_with", "required_without":
		return "is required"
	case "min", "gte":
		return boundMessage("at least", param, kind)
	case "max", "lte":
		return boundMessage("at most", param, kind)
	case "gt":
		return boundMessage("more than", param, kind)
	case "lt":
		return boundMessage("less than", param, kind)
	case "len":
		return boundMessage("exactly", param, kind)
	case "oneof":
		return "must be one of: " + strings.Join(strings.Fields(param), ", ")
	case "url", "uri", "http_url":
		return "must be an absolute http(s) URL"
	case "email":
		return "must be an email address"
	case "uuid", "uuid4", "uuid_rfc4122", "uuid4_rfc4122":
		return "must be a UUID"
	case "alphanum", "alphanumunicode", "alpha":
		return "must contain only letters and digits"
	case "unique":
		return "must not contain duplicates"
	case "excludesall", "excludes", "excludesrune":
		return fmt.Sprintf("must not contain any of %q", param)
	}
	if param != "" {
		return fmt.Sprintf("is not valid (%s=%s)", tag, param)
	}
	return fmt.Sprintf("is not valid (%s)", tag)
}

func boundMessage(rel, param string, kind reflect.Kind) string {
	switch kind {
	case reflect.String:
		return fmt.Sprintf("must be %s %s characters long", rel, param)
	case reflect.Slice, reflect.Array, reflect.Map:
		noun := "items"
		if param == "1" {
			noun = "item"
		}
		return fmt.Sprintf("must have %s %s %s", rel, param, noun)
	default:
		return fmt.Sprintf("must be %s %s", rel, param)
	}
}

// TranslateValidation turns an error from Validator().Struct (or from any
// validator made by NewValidator) into FieldErrors, with each path under
// prefix ("rateLimitOverrides", "" for none). Map entries become path
// segments: "Overrides.modelConcurrency[glm-5]" → "prefix.modelConcurrency.glm-5".
// An error that is not a validation error is returned as one FieldError on
// prefix. It returns nil for a nil error.
func TranslateValidation(err error, prefix string) FieldErrors {
	if err == nil {
		return nil
	}
	var ve validator.ValidationErrors
	if !errors.As(err, &ve) {
		return FieldErrors{{Field: prefix, Message: "is not valid"}}
	}
	out := make(FieldErrors, 0, len(ve))
	for _, fe := range ve {
		out = append(out, FieldError{
			Field:   joinPath(prefix, namespacePath(fe.Namespace())),
			Message: translate(fe),
		})
	}
	return sortFieldErrors(out)
}

// translate is the single place where a validator error becomes a message.
func translate(fe validator.FieldError) string {
	return describe(fe.Tag(), fe.Param(), fe.Kind())
}

// namespacePath turns a validator namespace into path segments: it drops the
// root struct name and turns "[key]" into a segment of its own. A key that
// itself holds brackets is split as well as can be; the decoders in this
// package avoid the guess by mapping namespaces they recorded.
func namespacePath(ns string) []string {
	_, rest, found := strings.Cut(ns, ".")
	if !found {
		// A bare "Root[key]" or a variable: keep what follows the root name.
		if i := strings.IndexByte(ns, '['); i >= 0 {
			rest = ns[i:]
		} else {
			return nil
		}
	}
	var segs []string
	for rest != "" {
		switch {
		case rest[0] == '.':
			rest = rest[1:]
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				segs = append(segs, rest[1:])
				rest = ""
				continue
			}
			segs = append(segs, rest[1:end])
			rest = rest[end+1:]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			segs = append(segs, rest[:end])
			rest = rest[end:]
		}
	}
	return segs
}

// joinPath joins a prefix and path segments with dots.
func joinPath(prefix string, segs []string) string {
	parts := make([]string, 0, len(segs)+1)
	if prefix != "" {
		parts = append(parts, prefix)
	}
	parts = append(parts, segs...)
	return strings.Join(parts, ".")
}
