package limits

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
)

// Validator tags this package registers on every validator it makes.
const (
	// tagBetween is "between=lo:hi": an integer from lo to hi, or a string
	// of lo to hi characters.
	tagBetween = "between"
	// tagCap is "cap=lo:hi": like between, for a per-model cap (its message
	// says "cap").
	tagCap = "cap"
	// tagModelKey checks a model name used as a per-model cap key.
	tagModelKey = "modelkey"
	// tagProviderKey checks a provider key such as "openai" or "zai".
	tagProviderKey = "providerkey"
	// tagModelPattern checks an entry of a client key's models list.
	tagModelPattern = "modelpattern"
)

const (
	// MaxModelKeyLen is the longest model name (in characters) a per-model
	// cap may use.
	MaxModelKeyLen = 128
	// MinCap and MaxCap bound a per-model cap.
	MinCap, MaxCap = 1, 10000
	// MaxModelCaps is the most per-model caps one connection may hold (the
	// max rule on Overrides.ModelConcurrency; a test keeps them in step).
	MaxModelCaps = 500

	maxProviderKeyLen = 32
)

// NewValidator returns a validator set up the way this project wants every
// validator: fields are named by their JSON tag (else their form tag), and
// the rules between=lo:hi, cap=lo:hi, modelkey and providerkey are
// registered. Handlers that need rules of their own build their shared
// instance with NewValidator, register their rules, and then only use it.
func NewValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(fieldName)
	// The functions below cannot fail to register: the tags are valid
	// names and the functions non-nil.
	for tag, fn := range map[string]validator.Func{
		tagBetween:     validateBetween,
		tagCap:         validateBetween,
		tagModelKey:    func(fl validator.FieldLevel) bool { return validModelKey(fl.Field().String()) },
		tagProviderKey: func(fl validator.FieldLevel) bool { return validProviderKey(fl.Field().String()) },
		tagUSD:         validateUSD,
		"alerturl":     validAlertURL,
		tagBudgetUSD:   validateBudgetUSD,
		tagModelPattern: func(fl validator.FieldLevel) bool {
			return validModelPattern(fl.Field().String())
		},
	} {
		if err := v.RegisterValidation(tag, fn); err != nil {
			panic("limits: register " + tag + ": " + err.Error())
		}
	}
	return v
}

// sharedValidator is built once, on first use, and never changed after.
var sharedValidator = sync.OnceValue(NewValidator)

// Validator returns the package's shared validator (see NewValidator). It is
// safe for concurrent use; do not register further rules on it — build your
// own with NewValidator instead.
func Validator() *validator.Validate { return sharedValidator() }

// fieldName names a struct field by its JSON tag, else its form tag, else
// its Go name; "-" hides it.
func fieldName(f reflect.StructField) string {
	for _, key := range []string{"json", "form"} {
		if tag, ok := f.Tag.Lookup(key); ok {
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" {
				return ""
			}
			if name != "" {
				return name
			}
		}
	}
	return f.Name
}

// parseRange reads "lo:hi".
func parseRange(param string) (lo, hi int64, ok bool) {
	l, h, found := strings.Cut(param, ":")
	if !found {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseInt(l, 10, 64)
	hi, err2 := strconv.ParseInt(h, 10, 64)
	return lo, hi, err1 == nil && err2 == nil
}

// validateBetween implements between=lo:hi and cap=lo:hi. A malformed
// parameter is a programming error and fails validation, so it is noticed.
func validateBetween(fl validator.FieldLevel) bool {
	lo, hi, ok := parseRange(fl.Param())
	if !ok {
		return false
	}
	f := fl.Field()
	switch f.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return f.Int() >= lo && f.Int() <= hi
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u := f.Uint()
		return hi >= 0 && u <= uint64(hi) && (lo <= 0 || u >= uint64(lo))
	case reflect.String:
		n := int64(utf8.RuneCountInString(f.String()))
		return n >= lo && n <= hi
	default:
		return false
	}
}

// validModelKey reports whether s may name a model in per-model caps: 1 to
// MaxModelKeyLen characters of valid UTF-8, none of them white space, a
// control character, '=' or ','. Those are exactly the characters the
// dashboard's model=cap text cannot carry, so every stored key can be shown
// and saved back unchanged.
func validModelKey(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxModelKeyLen {
		return false
	}
	for _, r := range s {
		if r == '=' || r == ',' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// validProviderKey reports whether s matches [a-z0-9-]{1,32}, the rule for a
// connection's provider.
func validProviderKey(s string) bool {
	if s == "" || len(s) > maxProviderKeyLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
