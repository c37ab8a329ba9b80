package handlers

import (
	_ "embed"
	"net/http"
	"strconv"
	"sync"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// openAPISpec is handlers/openapi.yaml, the OpenAPI 3.1 description of /api/v1.
//
//go:embed openapi.yaml
var openAPISpec []byte

// openAPIJSON is openAPISpec as JSON, converted once, on first use, by the
// configuration documents' YAML reader (numbers keep their text).
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return ConfigJSON(openAPISpec) })

// getOpenAPI serves GET /api/v1/openapi.yaml, without a token: it describes the API,
// not any data. ?format=json gives the same document as JSON.
func (s *Server) getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	doc, ct := openAPISpec, "application/yaml"
	switch r.URL.Query().Get("format") {
	case "", "yaml":
	case "json":
		var err error
		if doc, err = openAPIJSON(); err != nil {
			return err
		}
		ct = jsonContentType
	default:
		return &apiError{status: http.StatusBadRequest, detail: "invalid query parameters",
			fields: limits.FieldErrors{configError("format", codeConfigShape, `must be "yaml" or "json"`)}}
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
	return nil
}
