package limits

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"
)

// FieldError is one problem with one field of a written document. Field is
// a dotted path such as "rateLimitOverrides.modelConcurrency.glm-5"; Message
// says in plain English what is wrong and how to fix it. Code names the
// problem for machines (one of Codes, or a code of the package that made
// the error) and Args holds the values its wording needs, in the order the
// English message uses them, so the dashboard can say the same in another
// language. Neither is part of the JSON form.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Code    string `json:"-"`
	Args    []any  `json:"-"`
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

// SortFieldErrors orders problems by field, then message, and drops exact
// repeats: the one order every reported list of problems is in. It sorts fe
// in place and returns the shortened slice.
func SortFieldErrors(fe FieldErrors) FieldErrors {
	slices.SortFunc(fe, func(a, b FieldError) int {
		return cmp.Or(strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
	})
	return slices.CompactFunc(fe, func(a, b FieldError) bool {
		return a.Field == b.Field && a.Message == b.Message && a.Code == b.Code
	})
}

// message is a problem in words: its code, the values its wording needs, and
// the English text made from them.
type message struct {
	code string
	args []any
	text string
}

// newMessage words a problem: text is format filled in with args, so the
// English and the arguments a translation gets can never drift apart.
func newMessage(code, format string, args ...any) message {
	text := format
	if len(args) > 0 {
		text = fmt.Sprintf(format, args...)
	}
	return message{code: code, args: args, text: text}
}

// fieldError places m at field.
func (m message) fieldError(field string) FieldError {
	return FieldError{Field: field, Message: m.text, Code: m.code, Args: m.args}
}

// plainMessage words the problems that need no arguments: those the decoders
// find before validation runs, and a value that is simply not valid.
func plainMessage(code string) message {
	var text string
	switch code {
	case CodeUnknownField:
		text = "unknown field"
	case CodeDuplicateField:
		text = "duplicate field; give each key once"
	case CodeNotJSON:
		text = "is not valid JSON"
	case CodeNotObject:
		text = "must be a JSON object"
	case CodeNotModelMap:
		text = `must be an object of model names to caps, like {"glm-5": 2}`
	case CodeNotProviderMap:
		text = `must be an object of provider names to settings, like {"openai": {"maxConcurrent": 8}}`
	case CodeNotAliasMap:
		text = `must be an object of alias names to models, like {"fast": "zai/glm-5"}`
	case CodeUnique:
		text = "must not contain duplicates"
	case CodeNotModelList:
		text = `must be a list of models, like ["openai/gpt-4o", "glm-5", "zai/*"]`
	case CodeNotWhole:
		text = "must be a whole number"
	case CodeNotBool:
		text = "must be true or false"
	default:
		code, text = CodeInvalid, "is not valid"
	}
	return message{code: code, text: text}
}

// numberArg is a rule parameter as a message argument: an int64 when it is a
// whole number (so a translation can format it as one), else the text.
func numberArg(param string) any {
	if n, err := strconv.ParseInt(param, 10, 64); err == nil {
		return n
	}
	return param
}

// describe is the one table of validation messages: it turns a rule (a
// validator tag and its parameter) into plain words and a code. The
// validator's errors and the decoders' own type errors both go through it,
// so the same rule always reads the same.
func describe(tag, param string, kind reflect.Kind) message {
	l, h, isRange := strings.Cut(param, ":")
	lo, hi := numberArg(l), numberArg(h)
	switch tag {
	case tagBetween:
		if kind == reflect.String {
			return newMessage(CodeLengthRange, "must be %v to %v characters long", lo, hi)
		}
		if isRange {
			return newMessage(CodeWholeNumberRange, "must be a whole number from %v to %v", lo, hi)
		}
	case tagUSD:
		return usdMessage()
	case tagBudgetUSD:
		return budgetUSDMessage()
	case tagCap:
		return newMessage(CodeCapRange, "cap must be a whole number from %v to %v", lo, hi)
	case tagModelKey:
		return newMessage(CodeModelKey, "model name must be 1 to %d characters, with no spaces, '=' or ','", MaxModelKeyLen)
	case tagModelPattern:
		return newMessage(CodeModelPattern, "model must be 1 to %d characters — provider/model, a bare model id or provider/* — with no spaces, '=' or ','", MaxModelKeyLen)
	case tagProviderKey:
		return newMessage(CodeProviderKey, "provider name must be 1 to %d characters of a-z, 0-9 and '-'", maxProviderKeyLen)
	case "required", "required_if", "required_unless", "required_with", "required_without":
		return newMessage(CodeRequired, "is required")
	case "min", "gte":
		return boundMessage(CodeAtLeast, "at least", param, kind)
	case "max", "lte":
		return boundMessage(CodeAtMost, "at most", param, kind)
	case "gt":
		return boundMessage(CodeMoreThan, "more than", param, kind)
	case "lt":
		return boundMessage(CodeLessThan, "less than", param, kind)
	case "len":
		return boundMessage(CodeExactly, "exactly", param, kind)
	case "oneof":
		return newMessage(CodeOneOf, "must be one of: %s", strings.Join(strings.Fields(param), ", "))
	case "url", "uri", "http_url":
		return newMessage(CodeURL, "must be an absolute http(s) URL")
	case "email":
		return newMessage(CodeEmail, "must be an email address")
	case "uuid", "uuid4", "uuid_rfc4122", "uuid4_rfc4122":
		return newMessage(CodeUUID, "must be a UUID")
	case "alphanum", "alphanumunicode", "alpha":
		return newMessage(CodeAlphanumeric, "must contain only letters and digits")
	case "unique":
		return newMessage(CodeUnique, "must not contain duplicates")
	case "excludesall", "excludes", "excludesrune":
		return newMessage(CodeExcludes, "must not contain any of %q", param)
	}
	rule := tag
	if param != "" {
		rule = tag + "=" + param
	}
	return newMessage(CodeInvalidRule, "is not valid (%s)", rule)
}

// boundMessage words min, max, gt, lt and len. code is the rule's code for a
// number; strings add CodeSuffixChars and collections CodeSuffixItems.
func boundMessage(code, rel, param string, kind reflect.Kind) message {
	n := numberArg(param)
	switch kind {
	case reflect.String:
		return newMessage(code+CodeSuffixChars, "must be "+rel+" %v characters long", n)
	case reflect.Slice, reflect.Array, reflect.Map:
		noun := "items"
		if param == "1" {
			noun = "item"
		}
		return newMessage(code+CodeSuffixItems, "must have "+rel+" %v "+noun, n)
	default:
		return newMessage(code, "must be "+rel+" %v", n)
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
		return FieldErrors{plainMessage(CodeInvalid).fieldError(prefix)}
	}
	out := make(FieldErrors, 0, len(ve))
	for _, fe := range ve {
		out = append(out, translate(fe).fieldError(joinPath(prefix, namespacePath(fe.Namespace()))))
	}
	return SortFieldErrors(out)
}

// translate is the single place where a validator error becomes a message.
func translate(fe validator.FieldError) message {
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
