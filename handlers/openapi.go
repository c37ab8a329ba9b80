package handlers

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPISpec is handlers/openapi.yaml, the OpenAPI 3.1 description of /api/v1.
//
//go:embed openapi.yaml
var openAPISpec []byte

// getOpenAPI serves GET /api/v1/openapi.yaml, without a token: it describes the API,
// not any data.
func (s *Server) getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "application/yaml")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(openAPISpec)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPISpec)
	return nil
}
