package handlers

import (
	"errors"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// Validator tags the handlers add to the rules gateway/limits registers.
const (
	// tagConnName: 1–64 characters of [A-Za-z0-9._-] (a connection's name).
	tagConnName = "connname"
	// tagBaseURL: an absolute http(s) URL with a host and no query, fragment or
	// credentials, since request paths are appended to it.
	tagBaseURL = "baseurl"
	// tagSecret: 1–4096 printable ASCII characters (an upstream API key goes into a
	// header as it is).
	tagSecret = "secret"
	// tagLabel: 1–64 characters without control characters (token and key names).
	tagLabel = "label"
)

// Limits of the rules above.
const (
	maxConnNameLen = 64
	maxBaseURLLen  = 2048
	maxSecretLen   = 4096
	maxLabelLen    = 64
)

// ruleMessage words the handlers' own rules. Every other rule's message comes from
// gateway/limits, so one rule always reads the same on every surface.
func ruleMessage(tag string) (string, bool) {
	switch tag {
	case tagConnName:
		return "must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'", true
	case tagBaseURL:
		return "must be an absolute http(s) URL with a host and no query, fragment or credentials", true
	case tagSecret:
		return "must be 1 to 4096 printable ASCII characters, without spaces", true
	case tagLabel:
		return "must be 1 to 64 characters, without control characters", true
	}
	return "", false
}

// newValidator returns the handlers' shared validator: limits.NewValidator (JSON names
// as field names, the limits rules) plus the rules above. It is built once per Server
// and never changed after.
func newValidator() *validator.Validate {
	v := limits.NewValidator()
	for tag, fn := range map[string]func(string) bool{
		tagConnName: validConnName,
		tagBaseURL:  validBaseURL,
		tagSecret:   validSecret,
		tagLabel:    validLabel,
	} {
		if err := v.RegisterValidation(tag, func(fl validator.FieldLevel) bool {
			return fn(fl.Field().String())
		}); err != nil {
			panic("handlers: register " + tag + ": " + err.Error())
		}
	}
	return v
}

// validationErrors is the one function that turns an error of the shared validator into
// {field, message} pairs, with every path under prefix. The handlers' own rules get
// their messages from ruleMessage; all others are worded by limits.TranslateValidation.
func validationErrors(err error, prefix string) limits.FieldErrors {
	if err == nil {
		return nil
	}
	var ve validator.ValidationErrors
	if !errors.As(err, &ve) {
		return limits.TranslateValidation(err, prefix)
	}
	var out limits.FieldErrors
	for _, fe := range ve {
		// Translate one error at a time so the path rules stay those of limits.
		translated := limits.TranslateValidation(validator.ValidationErrors{fe}, prefix)
		if msg, ok := ruleMessage(fe.Tag()); ok {
			for i := range translated {
				translated[i].Message = msg
			}
		}
		out = append(out, translated...)
	}
	return out
}

func validConnName(s string) bool {
	if s == "" || len(s) > maxConnNameLen {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validBaseURL(s string) bool {
	if s == "" || len(s) > maxBaseURLLen || strings.TrimSpace(s) != s {
		return false
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil &&
		u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && !strings.Contains(s, "#")
}

func validSecret(s string) bool {
	if s == "" || len(s) > maxSecretLen {
		return false
	}
	for i := range len(s) {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func validLabel(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > maxLabelLen {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}
