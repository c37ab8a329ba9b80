package handlers

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

// createdClientKey is the answer to a key's creation: the only time its secret is shown.
type createdClientKey struct {
	store.ClientKey
	Secret string `json:"secret"`
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

// decodeClientKey strictly decodes a written client key: name (required, the
// connection-name rule), enabled (default true) and limits (gateway/limits'
// ClientKeyLimits, default {}); read-only fields are ignored, any other field is
// rejected. Every problem is reported together, with its path under prefix ("" for
// none), as limits.FieldErrors.
func (s *Server) decodeClientKey(data []byte, prefix string) (store.ClientKeyInput, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(data, &members); err != nil || members == nil {
		return store.ClientKeyInput{}, limits.FieldErrors{fieldError(prefix, limits.CodeNotObject)}
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
				errs = append(errs, fieldError(path(key), codeNotNull))
			case json.Unmarshal(raw, &doc.Name) != nil:
				errs = append(errs, fieldError(path(key), codeNotString))
			default:
				errs = append(errs, validationErrors(s.validate.Struct(doc), prefix)...)
			}
		case "enabled":
			if !null && json.Unmarshal(raw, &enabled) != nil {
				errs = append(errs, fieldError(path(key), codeNotBool))
			}
		case "limits":
			var fe limits.FieldErrors
			if lim, fe = limits.DecodeClientKeyLimits(raw, path(key)); len(fe) > 0 {
				errs = append(errs, fe...)
			}
		default:
			if !clientKeyReadOnly(key) {
				errs = append(errs, fieldError(path(key), limits.CodeUnknownField))
			}
		}
	}
	if !named {
		errs = append(errs, fieldError(path("name"), limits.CodeRequired))
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

// listClientKeys serves GET /api/v1/client-keys (never a secret), by name.
func (s *Server) listClientKeys(w http.ResponseWriter, r *http.Request) error {
	ks, err := s.store.ListClientKeys(r.Context())
	if err != nil {
		return err
	}
	if ks == nil {
		ks = []store.ClientKey{}
	}
	return writeJSON(w, http.StatusOK, list[store.ClientKey]{Items: ks}, "")
}

// createClientKey serves POST /api/v1/client-keys: {"name", "enabled"?, "limits"?}.
func (s *Server) createClientKey(w http.ResponseWriter, r *http.Request) error {
	body, err := readJSON(w, r, false)
	if err != nil {
		return err
	}
	in, err := s.decodeClientKey(body, "")
	if err != nil {
		return err
	}
	k, secret, err := s.store.CreateClientKey(r.Context(), actor(r), in)
	if err != nil {
		return keyNameTaken(err)
	}
	w.Header().Set("Location", apiPrefix+"client-keys/"+k.ID)
	return writeJSON(w, http.StatusCreated, createdClientKey{ClientKey: k, Secret: secret}, etag(k.Version))
}

// getClientKey serves GET /api/v1/client-keys/{id} (never the secret), the Location of
// a created key.
func (s *Server) getClientKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.store.GetClientKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	sp, err := s.store.ClientKeySpend(r.Context(), k.ID, s.now())
	if err != nil {
		return err
	}
	out := struct {
		store.ClientKey
		Spend spendJSON `json:"spend"`
	}{k, spendJSON{TodayUSD: microsToUSD(sp.TodayMicros), MonthUSD: microsToUSD(sp.MonthMicros)}}
	return writeJSON(w, http.StatusOK, out, etag(k.Version))
}

// spendJSON is a client key's spend in US dollars: the current UTC day and month.
type spendJSON struct {
	TodayUSD float64 `json:"todayUsd"`
	MonthUSD float64 `json:"monthUsd"`
}

// patchClientKey serves PATCH /api/v1/client-keys/{id}, a JSON Merge Patch applied to
// the key as the API shows it, under the row lock, then decoded as strictly as a
// creation: {"limits":{"models":null}} removes one limit and keeps the others.
func (s *Server) patchClientKey(w http.ResponseWriter, r *http.Request) error {
	pre := parseIfMatch(r)
	patch, err := readJSON(w, r, true)
	if err != nil {
		return err
	}
	k, err := s.store.UpdateClientKey(r.Context(), actor(r), r.PathValue("id"), pre.expected(),
		func(cur store.ClientKey) (store.ClientKeyInput, error) {
			if !pre.matches(cur.Version) {
				return store.ClientKeyInput{}, errPreconditionFailed()
			}
			doc, err := json.Marshal(cur)
			if err != nil {
				return store.ClientKeyInput{}, fmt.Errorf("handlers: encode client key: %w", err)
			}
			merged, err := limits.MergePatch(doc, patch)
			if err != nil {
				return store.ClientKeyInput{}, fmt.Errorf("handlers: merge patch: %w", err)
			}
			return s.decodeClientKey(merged, "")
		})
	if err != nil {
		return keyNameTaken(err)
	}
	return writeJSON(w, http.StatusOK, k, etag(k.Version))
}

// deleteClientKey serves DELETE /api/v1/client-keys/{id}, with If-Match as for
// connections.
func (s *Server) deleteClientKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	pre := parseIfMatch(r)
	expected := pre.expected()
	if pre.present && !pre.any && expected == 0 {
		cur, err := s.store.GetClientKey(r.Context(), id)
		if err != nil {
			return err
		}
		if !pre.matches(cur.Version) {
			return errPreconditionFailed()
		}
		expected = cur.Version
	}
	if err := s.store.DeleteClientKey(r.Context(), actor(r), id, expected); err != nil {
		return err
	}
	return writeNoContent(w)
}

// keyNameTaken turns the store's conflict on a client key write into a 409 that names
// the field; other errors pass through.
func keyNameTaken(err error) error {
	if errors.Is(err, store.ErrConflict) {
		return &apiError{
			status: http.StatusConflict,
			detail: "a client key with this name exists already",
			fields: limits.FieldErrors{fieldError("name", codeNameTaken)},
		}
	}
	return err
}
