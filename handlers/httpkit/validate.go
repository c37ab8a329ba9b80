package httpkit

import (
	"errors"
	"fmt"
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

// Codes of the problems the handlers find themselves, in limits.FieldError.Code next
// to the codes of gateway/limits. The dashboard words every code from its catalogs
// under "validation.<code>"; the API shows the English of apiMessage.
const (
	codeConnName  = "connName"  // the connname rule
	codeBaseURL   = "baseUrl"   // the baseurl rule
	codeSecret    = "secret"    // the secret rule
	codeLabel     = "label"     // the label rule
	codeNotNull   = "notNull"   // null for a field that cannot be absent
	codeNotString = "notString" // a field or list element that is not a string
	CodeNotBool   = "notBool"   // not true or false
	codeNotArray  = "notArray"  // not an array of strings
	codeNameTaken = "nameTaken" // another connection has the name
	CodeCursor    = "cursor"    // not a nextCursor the API gave out
	// codeKeyForHost: apiKey absent while baseUrl moves to another origin.
	codeKeyForHost = "keyForHost"
	// CodeUpstreamDenied: a baseUrl host in GATEHOUSE_UPSTREAM_DENY (argument: the host).
	CodeUpstreamDenied = "upstreamDenied"
)

// apiCodes lists the codes above; a test checks that the catalogs word each one.
func apiCodes() []string {
	return []string{codeConnName, codeBaseURL, codeSecret, codeLabel, codeNotNull, codeNotString,
		CodeNotBool, codeNotArray, codeNameTaken, CodeCursor, codeTimestamp, codeStatus, CodeTimeRange,
		codeKeyForHost, CodeUpstreamDenied}
}

// apiMessage is the English the API shows for the problems the handlers find
// themselves, by code (their own codes and the gateway/limits codes they share), with
// args filled in. It is the one table of those words.
func apiMessage(code string, args ...any) string {
	format := "is not valid"
	switch code {
	case codeConnName:
		format = "must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"
	case codeBaseURL:
		format = "must be an absolute http(s) URL with a host and no query, fragment or credentials"
	case codeSecret:
		format = "must be 1 to 4096 printable ASCII characters, without spaces"
	case codeLabel:
		format = "must be 1 to 64 characters, without control characters"
	case codeNotNull:
		format = "must not be null"
	case codeNotString:
		format = "must be a string"
	case CodeNotBool:
		format = "must be true or false"
	case codeNotArray:
		format = "must be an array of strings"
	case codeNameTaken:
		format = "is already taken"
	case CodeCursor:
		format = "must be the nextCursor of a previous page"
	case codeKeyForHost:
		format = "required when the base URL's host changes: the stored key never follows a URL to another host"
	case CodeUpstreamDenied:
		format = "resolves to an address GATEHOUSE_UPSTREAM_DENY refuses: %v"
	case limits.CodeUnknownField:
		format = "unknown field"
	case limits.CodeDuplicateField:
		format = "duplicate field; give each key once"
	case limits.CodeNotObject:
		format = "must be a JSON object"
	case limits.CodeNotWhole:
		format = "must be a whole number"
	case limits.CodeRequired:
		format = "is required"
	case limits.CodeWholeNumberRange:
		format = "must be a whole number from %v to %v"
	case limits.CodeLengthRange:
		format = "must be %v to %v characters long"
	case limits.CodeOneOf:
		format = "must be one of: %s"
	case codeTimestamp:
		format = "must be a time in RFC 3339 form, such as 2026-12-01T09:00:00Z"
	case codeStatus:
		format = "must be an HTTP status from 100 to 599 or a class such as 4xx"
	case CodeTimeRange:
		format = "must be after since, and the range not longer than the bucket allows (31 days of hours, 366 of days)"
	}
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

// FieldError is a problem the handlers found at field, worded by apiMessage.
func FieldError(field, code string, args ...any) limits.FieldError {
	return limits.FieldError{Field: field, Message: apiMessage(code, args...), Code: code, Args: args}
}

// ruleCode is the code of one of the handlers' own validator rules.
func ruleCode(tag string) (string, bool) {
	switch tag {
	case tagConnName:
		return codeConnName, true
	case tagBaseURL:
		return codeBaseURL, true
	case tagSecret:
		return codeSecret, true
	case tagLabel:
		return codeLabel, true
	}
	return "", false
}

// NewValidator returns the handlers' shared validator: limits.NewValidator (JSON names
// as field names, the limits rules) plus the rules above. It is built once per Server
// and never changed after.
func NewValidator() *validator.Validate {
	v := limits.NewValidator()
	for tag, fn := range map[string]func(string) bool{
		tagConnName: ValidConnName,
		tagBaseURL:  validBaseURL,
		tagSecret:   validSecret,
		tagLabel:    ValidLabel,
	} {
		if err := v.RegisterValidation(tag, func(fl validator.FieldLevel) bool {
			return fn(fl.Field().String())
		}); err != nil {
			panic("handlers: register " + tag + ": " + err.Error())
		}
	}
	return v
}

// ValidationErrors is the one function that turns an error of the shared validator into
// {field, message} pairs (each with its code), with every path under prefix. The
// handlers' own rules are worded by apiMessage; all others by limits.TranslateValidation.
func ValidationErrors(err error, prefix string) limits.FieldErrors {
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
		if code, ok := ruleCode(fe.Tag()); ok {
			for i := range translated {
				translated[i] = FieldError(translated[i].Field, code)
			}
		}
		out = append(out, translated...)
	}
	return out
}

func ValidConnName(s string) bool {
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

func ValidLabel(s string) bool {
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
