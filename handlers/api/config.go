package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// The declarative configuration (DESIGN.md "Declarative config"): one document with
// the settings, the connections and the client keys, exported, compared with what is
// stored (a plan) and applied in one transaction. The CLI (gatehouse config) and the
// REST API (/api/v1/config) share everything here through ConfigTool.

// Audit actors of configuration documents: "config:<token name>" over the API,
// ConfigActorCLI from the command line.
const (
	ConfigActorPrefix = "config:"
	ConfigActorCLI    = ConfigActorPrefix + "cli"
)

// Media types of a configuration document besides application/json.
const (
	YAMLContentType = "application/yaml"
)

// yamlMediaTypes are the media types read (and, in Accept, answered) as YAML.
var yamlMediaTypes = []string{YAMLContentType, "application/x-yaml", "text/yaml", "text/x-yaml"}

// Codes of the problems only a configuration document has. The dashboard never shows
// them (it has no configuration page), so they are not in apiCodes.
const (
	codeConfigShape = "configShape" // a part of the document has the wrong JSON type
	codeConfigEnv   = "configEnv"   // an apiKey's ${ENV_VAR} cannot be used
	codeConfigTwice = "configTwice" // a name given to two entries of one list
	codeConfigTag   = "configTag"   // a YAML tag other than the core schema's
)

// GetConfig serves GET /api/v1/config (admin): the configuration document, JSON unless
// ?format=yaml or, without format, an Accept that names a YAML type.
func (s *Server) GetConfig(w http.ResponseWriter, r *http.Request) error {
	format := r.URL.Query().Get("format")
	switch format {
	case "json", "yaml":
	case "":
		format = "json"
		if acceptsYAML(r.Header.Get("Accept")) {
			format = "yaml"
		}
	default:
		return &httpkit.APIError{Status: http.StatusBadRequest, Detail: "invalid query parameters",
			Fields: limits.FieldErrors{configError("format", codeConfigShape, `must be "json" or "yaml"`)}}
	}
	out, err := s.exportConfig(r.Context(), format)
	if err != nil {
		return err
	}
	ct := httpkit.JSONContentType
	if format == "yaml" {
		ct = YAMLContentType + "; charset=utf-8"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Vary", "Accept")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return nil
}

// acceptsYAML reports whether an Accept header names a YAML media type (before any
// JSON one; quality values are not weighed: a client asks for one or the other).
func acceptsYAML(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if slices.Contains(yamlMediaTypes, mt) {
			return true
		}
		if mt == httpkit.JSONContentType {
			return false
		}
	}
	return false
}

// PostConfigApply serves POST /api/v1/config/apply[?dryRun=true][&prune=true] (admin):
// a configuration document, JSON or YAML, validated whole (422 with every problem, nothing
// written) and applied in one transaction; the answer is the plan, with a created client
// key's secret shown once. ${ENV_VAR} references are refused (see ApplyOptions.Getenv).
func (s *Server) PostConfigApply(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var (
		errs limits.FieldErrors
		opts ApplyOptions
	)
	for _, p := range []struct {
		name string
		dst  *bool
	}{{"dryRun", &opts.DryRun}, {"prune", &opts.Prune}} {
		if v := q.Get(p.name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, httpkit.FieldError(p.name, httpkit.CodeNotBool))
			}
			*p.dst = b
		}
	}
	if len(errs) > 0 {
		return &httpkit.APIError{Status: http.StatusBadRequest, Detail: "invalid query parameters", Fields: errs}
	}
	doc, err := readConfigBody(w, r)
	if err != nil {
		return err
	}
	plan, err := s.applyConfig(r.Context(), ConfigActorPrefix+strings.TrimPrefix(httpkit.Actor(r), "token:"), doc, opts)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, plan, "")
}

// readConfigBody reads a configuration document declared as JSON (read as every API
// body is) or YAML (converted by ConfigJSON; a syntax error is a 400 naming its line).
func readConfigBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == httpkit.JSONContentType {
		return httpkit.ReadJSON(w, r, false)
	}
	if err != nil || !slices.Contains(yamlMediaTypes, mt) {
		return nil, httpkit.NewAPIError(http.StatusUnsupportedMediaType, "the request body must be application/json or application/yaml")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpkit.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooBig
		}
		return nil, fmt.Errorf("handlers: read request body: %w", err)
	}
	doc, err := ConfigJSON(body)
	var se *SyntaxError
	if errors.As(err, &se) {
		return nil, httpkit.NewAPIError(http.StatusBadRequest, "the request body is not valid YAML: "+se.Error())
	}
	if err != nil {
		return nil, err
	}
	return doc, nil
}
