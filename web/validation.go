package web

import (
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// validationKey is the catalog key that words a validation problem's code.
func validationKey(code string) string { return "validation." + code }

// HasValidationMessage reports whether the catalogs word code: they hold
// "validation.<code>", or its plural forms "validation.<code>.one" and ".other"
// (for a code whose first argument is a count).
func HasValidationMessage(code string) bool {
	l := NewLocalizer(DefaultLocale)
	key := validationKey(code)
	return code != "" && (l.HasKey(key) || l.HasKey(key+".one") && l.HasKey(key+".other"))
}

// ValidationMessage words a validation problem in l's language by its code: the
// catalog entry "validation.<code>" filled in with args (a plural entry is chosen by
// the first argument, a count). A problem whose code is empty or unknown to the
// catalogs, or whose arguments do not fit the entry, keeps english, the message the
// REST API shows.
func ValidationMessage(l *Localizer, code string, args []any, english string) string {
	if !HasValidationMessage(code) {
		return english
	}
	key := validationKey(code)
	var msg string
	if l.HasKey(key) {
		// Formatted even without arguments, so an entry that expects some shows
		// fmt's marks below instead of bare verbs.
		msg = fmt.Sprintf(l.T(key), args...)
	} else {
		n, ok := countArg(args)
		if !ok {
			return english
		}
		msg = l.N(key, n, args[1:]...)
	}
	if strings.Contains(msg, "%!") {
		// The arguments do not match the entry's verbs: a defect, but one that must
		// not show a person fmt's error marks.
		return english
	}
	return msg
}

// countArg reads the first argument as a count.
func countArg(args []any) (int64, bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch n := args[0].(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// FieldErrorMessage words a problem from gateway/limits or the REST API's validation
// in l's language (see ValidationMessage). A bad line of the model=cap textarea
// (limits.CodeLine) is worded as the whole line error, `line 2: "glm-5=0": …`.
func FieldErrorMessage(l *Localizer, fe limits.FieldError) string {
	if fe.Code == limits.CodeLine && len(fe.Args) == 1 {
		if le, ok := fe.Args[0].(limits.LineError); ok {
			return LineErrorMessage(l, le)
		}
		return fe.Message
	}
	return ValidationMessage(l, fe.Code, fe.Args, fe.Message)
}

// LineErrorMessage words one bad line of a limits textarea codec (model=cap, the
// per-provider lines) in l's language, with the part of the line it concerns first
// when there is one: `linha 2: "glm-5=0": o limite deve ser um número inteiro de 1 a
// 10000`, `line 1: "zai x": maxConcurrent must be a whole number from 0 to 100000`.
func LineErrorMessage(l *Localizer, le limits.LineError) string {
	if le.Key == "" {
		return LineMessage(l, le.Line, le.Entry, ValidationMessage(l, le.Code, le.Args, le.Message))
	}
	english := strings.TrimPrefix(le.Message, le.Key+" ")
	return LineMessage(l, le.Line, le.Entry, le.Key+" "+ValidationMessage(l, le.Code, le.Args, english))
}
