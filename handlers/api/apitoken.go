package api

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

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

// ListAPITokens serves GET /api/v1/api-tokens (never a secret: name, role, preview).
func (s *Server) ListAPITokens(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.store.ListAPITokens(r.Context())
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []store.APIToken{}
	}
	return httpkit.WriteJSON(w, http.StatusOK, list[store.APIToken]{Items: ts}, "")
}

// CreateAPIToken serves POST /api/v1/api-tokens: {"name", "role"} (role defaults to
// viewer, the least privilege).
func (s *Server) CreateAPIToken(w http.ResponseWriter, r *http.Request) error {
	body, err := httpkit.ReadJSON(w, r, false)
	if err != nil {
		return err
	}
	doc := apiTokenDoc{Role: store.RoleViewer}
	errs := httpkit.DecodeStringMembers(body, map[string]*string{"name": &doc.Name, "role": &doc.Role})
	errs = append(errs, httpkit.DropFields(httpkit.ValidationErrors(s.validate.Struct(doc), ""), errs)...)
	if len(errs) > 0 {
		return limits.SortFieldErrors(errs)
	}
	t, secret, err := s.store.CreateAPIToken(r.Context(), httpkit.Actor(r), doc.Name, doc.Role)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"api-tokens/"+t.ID)
	return httpkit.WriteJSON(w, http.StatusCreated, createdAPIToken{APIToken: t, Secret: secret}, "")
}

// GetAPIToken serves GET /api/v1/api-tokens/{id} (never the secret), the Location of
// a created token.
func (s *Server) GetAPIToken(w http.ResponseWriter, r *http.Request) error {
	t, err := s.store.GetAPIToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, t, "")
}

// DeleteAPIToken serves DELETE /api/v1/api-tokens/{id}.
func (s *Server) DeleteAPIToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.store.DeleteAPIToken(r.Context(), httpkit.Actor(r), r.PathValue("id")); err != nil {
		return err
	}
	return writeNoContent(w)
}
