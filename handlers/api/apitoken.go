package handlers

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// apiTokenDoc is a token as a client creates it.
type apiTokenDoc struct {
	Name string `json:"name" validate:"label"`
	Role string `json:"role" validate:"oneof=admin viewer"`
}

// createdAPIToken is the answer to a token's creation: the only time its secret is shown.
type createdAPIToken struct {
	store.APIToken
	Secret string `json:"secret"`
}

// listAPITokens serves GET /api/v1/api-tokens (never a secret: name, role, preview).
func (s *Server) listAPITokens(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.store.ListAPITokens(r.Context())
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []store.APIToken{}
	}
	return writeJSON(w, http.StatusOK, list[store.APIToken]{Items: ts}, "")
}

// createAPIToken serves POST /api/v1/api-tokens: {"name", "role"} (role defaults to
// viewer, the least privilege).
func (s *Server) createAPIToken(w http.ResponseWriter, r *http.Request) error {
	body, err := readJSON(w, r, false)
	if err != nil {
		return err
	}
	doc := apiTokenDoc{Role: store.RoleViewer}
	errs := decodeStringMembers(body, map[string]*string{"name": &doc.Name, "role": &doc.Role})
	errs = append(errs, dropFields(validationErrors(s.validate.Struct(doc), ""), errs)...)
	if len(errs) > 0 {
		return limits.SortFieldErrors(errs)
	}
	t, secret, err := s.store.CreateAPIToken(r.Context(), actor(r), doc.Name, doc.Role)
	if err != nil {
		return err
	}
	w.Header().Set("Location", apiPrefix+"api-tokens/"+t.ID)
	return writeJSON(w, http.StatusCreated, createdAPIToken{APIToken: t, Secret: secret}, "")
}

// getAPIToken serves GET /api/v1/api-tokens/{id} (never the secret), the Location of
// a created token.
func (s *Server) getAPIToken(w http.ResponseWriter, r *http.Request) error {
	t, err := s.store.GetAPIToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t, "")
}

// deleteAPIToken serves DELETE /api/v1/api-tokens/{id}.
func (s *Server) deleteAPIToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.store.DeleteAPIToken(r.Context(), actor(r), r.PathValue("id")); err != nil {
		return err
	}
	return writeNoContent(w)
}
