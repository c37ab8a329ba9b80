package httpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// connectionDoc is a connection as a client writes it, after decoding. The validate
// tags hold the field rules of DESIGN.md; rateLimitOverrides is checked by
// gateway/limits.
type connectionDoc struct {
	Name     string   `json:"name" validate:"required,connname"`
	Provider string   `json:"provider" validate:"required,providerkey"`
	APIStyle string   `json:"apiStyle" validate:"required,oneof=openai anthropic gemini"`
	BaseURL  string   `json:"baseUrl" validate:"required,baseurl"`
	APIKey   *string  `json:"apiKey" validate:"omitnil,secret"`
	Models   []string `json:"models" validate:"required,min=1,max=500,unique,dive,modelkey"`
	Priority int      `json:"priority" validate:"between=-1000:1000"`
	Enabled  bool     `json:"enabled"`
}

// connectionReadOnly reports the fields of a connection response that writes ignore,
// so a GET body can be PUT back.
func connectionReadOnly(field string) bool {
	switch field {
	case "id", "version", "apiKeyPreview", "createdAt", "updatedAt", "health":
		return true
	}
	return false
}

// DecodeConnection strictly decodes a written connection document: every problem is
// reported together, each with its path, as limits.FieldErrors. Read-only fields are
// ignored and any other unknown field is rejected. On create, apiKey is required; on
// update an absent apiKey keeps the stored key. Absent (or null) priority, enabled and
// rateLimitOverrides take their defaults: 0, true and {}.
func (s *Core) DecodeConnection(data []byte, create bool) (store.ConnectionInput, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return store.ConnectionInput{}, limits.FieldErrors{FieldError("", limits.CodeNotObject)}
	}
	doc := connectionDoc{Enabled: true}
	var (
		errs      limits.FieldErrors
		bad       = map[string]bool{}
		overrides limits.Overrides
	)
	fail := func(field, code string) {
		errs = append(errs, FieldError(field, code))
		bad[field] = true
	}
	for key, raw := range members {
		null := string(bytes.TrimSpace(raw)) == "null"
		switch key {
		case "name", "provider", "apiStyle", "baseUrl":
			var v string
			switch {
			case null:
				fail(key, codeNotNull)
			case json.Unmarshal(raw, &v) != nil:
				fail(key, codeNotString)
			}
			switch key {
			case "name":
				doc.Name = v
			case "provider":
				doc.Provider = v
			case "apiStyle":
				doc.APIStyle = v
			case "baseUrl":
				doc.BaseURL = v
			}
		case "apiKey":
			if null {
				if create {
					fail(key, codeNotNull)
				}
				continue
			}
			var v string
			if json.Unmarshal(raw, &v) != nil {
				fail(key, codeNotString)
				continue
			}
			doc.APIKey = &v
		case "models":
			if null {
				fail(key, codeNotNull)
				continue
			}
			var fe limits.FieldErrors
			if doc.Models, fe = decodeStrings(raw, key); len(fe) > 0 {
				// The list is rejected as a whole below; still name every bad
				// element, not only those that are not strings.
				errs = append(errs, fe...)
				errs = append(errs, s.modelElementErrors(raw, key)...)
				bad[key] = true
			}
		case "priority":
			if null {
				continue
			}
			n, ok := WholeNumber(raw)
			if !ok {
				fail(key, limits.CodeNotWhole)
				continue
			}
			doc.Priority = int(min(max(n, math.MinInt32), math.MaxInt32))
		case "enabled":
			if null {
				continue
			}
			if json.Unmarshal(raw, &doc.Enabled) != nil {
				fail(key, CodeNotBool)
			}
		case "rateLimitOverrides":
			if null {
				continue
			}
			var fe limits.FieldErrors
			if overrides, fe = limits.DecodeOverrides(raw, key); len(fe) > 0 {
				errs = append(errs, fe...)
				bad[key] = true
			}
		default:
			if !connectionReadOnly(key) {
				fail(key, limits.CodeUnknownField)
			}
		}
	}
	if create && doc.APIKey == nil && !bad["apiKey"] {
		errs = append(errs, FieldError("apiKey", limits.CodeRequired))
	}
	for _, fe := range ValidationErrors(s.validate.Struct(doc), "") {
		top, _, _ := strings.Cut(fe.Field, ".")
		if !bad[top] {
			errs = append(errs, fe)
		}
	}
	if len(errs) > 0 {
		return store.ConnectionInput{}, limits.SortFieldErrors(errs)
	}
	ov, err := json.Marshal(overrides)
	if err != nil {
		return store.ConnectionInput{}, fmt.Errorf("handlers: encode overrides: %w", err)
	}
	in := store.ConnectionInput{
		Name:               doc.Name,
		Provider:           doc.Provider,
		APIStyle:           doc.APIStyle,
		BaseURL:            doc.BaseURL,
		Models:             doc.Models,
		Priority:           doc.Priority,
		Enabled:            doc.Enabled,
		RateLimitOverrides: ov,
	}
	if doc.APIKey != nil {
		in.APIKey = *doc.APIKey
	}
	return in, nil
}

// decodeStrings decodes an array of strings, reporting a non-array at field and each
// element that is not a string at field.<index>.
func decodeStrings(raw json.RawMessage, field string) ([]string, limits.FieldErrors) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, limits.FieldErrors{FieldError(field, codeNotArray)}
	}
	out := make([]string, 0, len(elems))
	var errs limits.FieldErrors
	for i, e := range elems {
		var v string
		if string(bytes.TrimSpace(e)) == "null" || json.Unmarshal(e, &v) != nil {
			errs = append(errs, FieldError(fmt.Sprintf("%s.%d", field, i), codeNotString))
			continue
		}
		out = append(out, v)
	}
	return out, errs
}

// modelElementErrors checks every string element of the array raw against the model
// id rule, reporting each bad one at field.<index>. DecodeConnection uses it when some
// elements are not strings, since the whole-list validation is skipped then.
func (s *Core) modelElementErrors(raw json.RawMessage, field string) limits.FieldErrors {
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil
	}
	var errs limits.FieldErrors
	for i, e := range elems {
		var v string
		if json.Unmarshal(e, &v) != nil {
			continue
		}
		errs = append(errs, ValidationErrors(s.validate.Var(v, "modelkey"), fmt.Sprintf("%s.%d", field, i))...)
	}
	return errs
}

// WholeNumber reads a JSON number with no fractional part (1, 1.0 and 1e3 are whole,
// 1.5, 1e-999999999 and "1" are not), saturated to the int64 range, exactly as
// gateway/limits reads the overrides.
func WholeNumber(raw json.RawMessage) (int64, bool) {
	return limits.ParseWholeNumber(string(bytes.TrimSpace(raw)))
}

// NameTaken turns the store's conflict on a connection write into a 409 that names the
// field; other errors pass through.
func NameTaken(err error) error {
	if errors.Is(err, store.ErrConflict) {
		return &APIError{
			Status: http.StatusConflict,
			Detail: "a connection with this name exists already",
			Fields: limits.FieldErrors{FieldError("name", codeNameTaken)},
		}
	}
	return err
}
