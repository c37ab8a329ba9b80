package api

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
)

// GetGates serves GET /api/v1/gates: the gateway's live gates and connection health.
// Without a gateway both lists are empty.
func (s *Server) GetGates(w http.ResponseWriter, r *http.Request) error {
	return httpkit.WriteJSON(w, http.StatusOK, httpkit.NewGatesView(s.LiveSnapshot()), "")
}
