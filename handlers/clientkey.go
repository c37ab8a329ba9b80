package handlers

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/store"
)

// clientKeyDoc is a client key as a client creates it.
type clientKeyDoc struct {
	Name string `json:"name" validate:"label"`
}

// createdClientKey is the answer to a key's creation: the only time its secret is shown.
type createdClientKey struct {
	store.ClientKey
	Secret string `json:"secret"`
}

// listClientKeys serves GET /api/v1/client-keys (never a secret: name, preview, times).
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

// createClientKey serves POST /api/v1/client-keys: {"name"}.
func (s *Server) createClientKey(w http.ResponseWriter, r *http.Request) error {
	body, err := readJSON(w, r, false)
	if err != nil {
		return err
	}
	var doc clientKeyDoc
	errs := decodeStringMembers(body, map[string]*string{"name": &doc.Name})
	errs = append(errs, dropFields(validationErrors(s.validate.Struct(doc), ""), errs)...)
	if len(errs) > 0 {
		return sortErrors(errs)
	}
	k, secret, err := s.store.CreateClientKey(r.Context(), actor(r), doc.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", apiPrefix+"client-keys/"+k.ID)
	return writeJSON(w, http.StatusCreated, createdClientKey{ClientKey: k, Secret: secret}, "")
}

// getClientKey serves GET /api/v1/client-keys/{id} (never the secret), the Location of
// a created key.
func (s *Server) getClientKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.store.GetClientKey(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, k, "")
}

// deleteClientKey serves DELETE /api/v1/client-keys/{id}.
func (s *Server) deleteClientKey(w http.ResponseWriter, r *http.Request) error {
	if err := s.store.DeleteClientKey(r.Context(), actor(r), r.PathValue("id")); err != nil {
		return err
	}
	return writeNoContent(w)
}
