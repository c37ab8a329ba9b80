package httpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// clientKeyDoc is a client key as a client writes it, after decoding; limits are
// checked by gateway/limits.
type clientKeyDoc struct {
	Name string `json:"name" validate:"connname"`
}

// clientKeyReadOnly reports the fields of a client key response that writes ignore, so
// a GET body can be written back.
func clientKeyReadOnly(field string) bool {
	switch field {
	case "id", "preview", "version", "createdAt", "updatedAt", "lastUsedAt", "spend":
		return true
	}
	return false
}

// DecodeClientKey strictly decodes a written client key: name (required, the
// connection-name rule), enabled (default true) and limits (gateway/limits'
// ClientKeyLimits, default {}); read-only fields are ignored, any other field is
// rejected. Every problem is reported together, with its path under prefix ("" for
// none), as limits.FieldErrors.
func (s *Core) DecodeClientKey(data []byte, prefix string) (store.ClientKeyInput, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return store.ClientKeyInput{}, limits.FieldErrors{FieldError(prefix, limits.CodeNotObject)}
	}
	path := func(field string) string {
		if prefix == "" {
			return field
		}
		return prefix + "." + field
	}
	var (
		doc     clientKeyDoc
		enabled = true
		lim     limits.ClientKeyLimits
		errs    limits.FieldErrors
		named   bool
	)
	for key, raw := range members {
		null := string(bytes.TrimSpace(raw)) == "null"
		switch key {
		case "name":
			named = true
			switch {
			case null:
				errs = append(errs, FieldError(path(key), codeNotNull))
			case json.Unmarshal(raw, &doc.Name) != nil:
				errs = append(errs, FieldError(path(key), codeNotString))
			default:
				errs = append(errs, ValidationErrors(s.validate.Struct(doc), prefix)...)
			}
		case "enabled":
			if !null && json.Unmarshal(raw, &enabled) != nil {
				errs = append(errs, FieldError(path(key), CodeNotBool))
			}
		case "limits":
			var fe limits.FieldErrors
			if lim, fe = limits.DecodeClientKeyLimits(raw, path(key)); len(fe) > 0 {
				errs = append(errs, fe...)
			}
		default:
			if !clientKeyReadOnly(key) {
				errs = append(errs, FieldError(path(key), limits.CodeUnknownField))
			}
		}
	}
	if !named {
		errs = append(errs, FieldError(path("name"), limits.CodeRequired))
	}
	if len(errs) > 0 {
		return store.ClientKeyInput{}, limits.SortFieldErrors(errs)
	}
	l, err := json.Marshal(lim)
	if err != nil {
		return store.ClientKeyInput{}, fmt.Errorf("handlers: encode client key limits: %w", err)
	}
	return store.ClientKeyInput{Name: doc.Name, Enabled: enabled, Limits: l}, nil
}

// KeyNameTaken turns the store's conflict on a client key write into a 409 that names
// the field; other errors pass through.
func KeyNameTaken(err error) error {
	if errors.Is(err, store.ErrConflict) {
		return &APIError{
			Status: http.StatusConflict,
			Detail: "a client key with this name exists already",
			Fields: limits.FieldErrors{FieldError("name", codeNameTaken)},
		}
	}
	return err
}
