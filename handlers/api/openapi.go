package api

import (
	_ "embed"
	"net/http"
	"strconv"
	"sync"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// OpenAPISpec is handlers/api/openapi.yaml, the OpenAPI 3.1 description of /api/v1.
//
//go:embed openapi.yaml
var OpenAPISpec []byte

// openAPIJSON is OpenAPISpec as JSON, converted once, on first use, by the
// configuration documents' YAML reader (numbers keep their text).
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return ConfigJSON(OpenAPISpec) })

// GetOpenAPI serves GET /api/v1/openapi.yaml, without a token: it describes the API,
// not any data. ?format=json gives the same document as JSON.
func (s *Server) GetOpenAPI(w http.ResponseWriter, r *http.Request) error {
	doc, ct := OpenAPISpec, "application/yaml"
	switch r.URL.Query().Get("format") {
	case "", "yaml":
	case "json":
		var err error
		if doc, err = openAPIJSON(); err != nil {
			return err
		}
		ct = httpkit.JSONContentType
	default:
		return &httpkit.APIError{Status: http.StatusBadRequest, Detail: "invalid query parameters",
			Fields: limits.FieldErrors{configError("format", codeConfigShape, `must be "yaml" or "json"`)}}
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
	return nil
}
