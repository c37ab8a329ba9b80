package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// createdClientKey is the answer to a key's creation: the only time its secret is shown.
type createdClientKey struct {
	store.ClientKey
	Secret string `json:"secret"`
}

// ListClientKeys serves GET /api/v1/client-keys (never a secret), by name.
func (s *Server) ListClientKeys(w http.ResponseWriter, r *http.Request) error {
	ks, err := s.store.ListClientKeys(r.Context())
	if err != nil {
		return err
	}
	if ks == nil {
		ks = []store.ClientKey{}
	}
	return httpkit.WriteJSON(w, http.StatusOK, list[store.ClientKey]{Items: ks}, "")
}

// CreateClientKey serves POST /api/v1/client-keys: {"name", "enabled"?, "limits"?}.
func (s *Server) CreateClientKey(w http.ResponseWriter, r *http.Request) error {
	body, err := httpkit.ReadJSON(w, r, false)
	if err != nil {
		return err
	}
	in, err := s.DecodeClientKey(body, "")
	if err != nil {
		return err
	}
	k, secret, err := s.store.CreateClientKey(r.Context(), httpkit.Actor(r), in)
	if err != nil {
		return httpkit.KeyNameTaken(err)
	}
	w.Header().Set("Location", Prefix+"client-keys/"+k.ID)
	return httpkit.WriteJSON(w, http.StatusCreated, createdClientKey{ClientKey: k, Secret: secret}, etag(k.Version))
}

// GetClientKey serves GET /api/v1/client-keys/{id} (never the secret), the Location of
// a created key.
func (s *Server) GetClientKey(w http.ResponseWriter, r *http.Request) error {
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
	}{k, spendJSON{TodayUSD: httpkit.MicrosToUSD(sp.TodayMicros), MonthUSD: httpkit.MicrosToUSD(sp.MonthMicros)}}
	return httpkit.WriteJSON(w, http.StatusOK, out, etag(k.Version))
}

// spendJSON is a client key's spend in US dollars: the current UTC day and month.
type spendJSON struct {
	TodayUSD float64 `json:"todayUsd"`
	MonthUSD float64 `json:"monthUsd"`
}

// PatchClientKey serves PATCH /api/v1/client-keys/{id}, a JSON Merge Patch applied to
// the key as the API shows it, under the row lock, then decoded as strictly as a
// creation: {"limits":{"models":null}} removes one limit and keeps the others.
func (s *Server) PatchClientKey(w http.ResponseWriter, r *http.Request) error {
	pre := parseIfMatch(r)
	patch, err := httpkit.ReadJSON(w, r, true)
	if err != nil {
		return err
	}
	k, err := s.store.UpdateClientKey(r.Context(), httpkit.Actor(r), r.PathValue("id"), pre.expected(),
		func(cur store.ClientKey) (store.ClientKeyInput, error) {
			if !pre.matches(cur.Version) {
				return store.ClientKeyInput{}, httpkit.ErrPreconditionFailed()
			}
			doc, err := json.Marshal(cur)
			if err != nil {
				return store.ClientKeyInput{}, fmt.Errorf("handlers: encode client key: %w", err)
			}
			merged, err := limits.MergePatch(doc, patch)
			if err != nil {
				return store.ClientKeyInput{}, fmt.Errorf("handlers: merge patch: %w", err)
			}
			return s.DecodeClientKey(merged, "")
		})
	if err != nil {
		return httpkit.KeyNameTaken(err)
	}
	return httpkit.WriteJSON(w, http.StatusOK, k, etag(k.Version))
}

// DeleteClientKey serves DELETE /api/v1/client-keys/{id}, with If-Match as for
// connections.
func (s *Server) DeleteClientKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	pre := parseIfMatch(r)
	expected := pre.expected()
	if pre.present && !pre.any && expected == 0 {
		cur, err := s.store.GetClientKey(r.Context(), id)
		if err != nil {
			return err
		}
		if !pre.matches(cur.Version) {
			return httpkit.ErrPreconditionFailed()
		}
		expected = cur.Version
	}
	if err := s.store.DeleteClientKey(r.Context(), httpkit.Actor(r), id, expected); err != nil {
		return err
	}
	return writeNoContent(w)
}
