package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
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
	yamlContentType = "application/yaml"
)

// yamlMediaTypes are the media types read (and, in Accept, answered) as YAML.
var yamlMediaTypes = []string{yamlContentType, "application/x-yaml", "text/yaml", "text/x-yaml"}

// Codes of the problems only a configuration document has. The dashboard never shows
// them (it has no configuration page), so they are not in apiCodes.
const (
	codeConfigShape = "configShape" // a part of the document has the wrong JSON type
	codeConfigEnv   = "configEnv"   // an apiKey's ${ENV_VAR} cannot be used
	codeConfigTwice = "configTwice" // a name given to two entries of one list
)

// configDocument is the configuration document as export writes it. Lists are sorted
// by name so two exports diff cleanly; secrets are never part of it.
type configDocument struct {
	Settings    map[string]json.RawMessage `json:"settings"`
	Connections []configConnection         `json:"connections"`
	ClientKeys  []configClientKey          `json:"clientKeys"`
}

// configConnection is a connection in a configuration document: the API's shape
// without the read-only fields and without apiKey.
type configConnection struct {
	Name               string          `json:"name"`
	Provider           string          `json:"provider"`
	APIStyle           string          `json:"apiStyle"`
	BaseURL            string          `json:"baseUrl"`
	Models             []string        `json:"models"`
	Priority           int             `json:"priority"`
	Enabled            bool            `json:"enabled"`
	RateLimitOverrides json.RawMessage `json:"rateLimitOverrides"`
}

// configClientKey is a client key in a configuration document: the API's shape
// without the read-only fields (the secret is never part of it).
type configClientKey struct {
	Name    string          `json:"name"`
	Enabled bool            `json:"enabled"`
	Limits  json.RawMessage `json:"limits"`
}

func configClientKeyOf(k store.ClientKey) configClientKey {
	l := k.Limits
	if len(bytes.TrimSpace(l)) == 0 || string(bytes.TrimSpace(l)) == "null" {
		l = json.RawMessage("{}")
	}
	if canon, err := canonicalJSON(l); err == nil {
		l = canon
	}
	return configClientKey{Name: k.Name, Enabled: k.Enabled, Limits: l}
}

func configConnectionOf(c store.Connection) configConnection {
	ov := c.RateLimitOverrides
	if len(bytes.TrimSpace(ov)) == 0 || string(bytes.TrimSpace(ov)) == "null" {
		ov = json.RawMessage("{}")
	}
	if canon, err := canonicalJSON(ov); err == nil {
		ov = canon // keys sorted, so two exports diff cleanly whatever the storage order
	}
	models := c.Models
	if models == nil {
		models = []string{}
	}
	return configConnection{Name: c.Name, Provider: c.Provider, APIStyle: c.APIStyle, BaseURL: c.BaseURL,
		Models: models, Priority: c.Priority, Enabled: c.Enabled, RateLimitOverrides: ov}
}

// settingsDocument is the settings as a configuration document holds them: the API's
// view (defaults filled in) without version and updatedAt.
func settingsDocument(data json.RawMessage) (map[string]json.RawMessage, error) {
	v, err := settingsView(store.Settings{Data: data})
	if err != nil {
		return nil, err
	}
	delete(v, "version")
	delete(v, "updatedAt")
	return v, nil
}

// ConfigTool exports, plans and applies configuration documents over a store, with the
// same validation as the REST API. The CLI uses it; the API routes use the Server's.
type ConfigTool struct {
	s *Server
}

// NewConfigTool returns a ConfigTool over st, without the dashboard's state.
func NewConfigTool(st *store.Store) *ConfigTool {
	return &ConfigTool{s: &Server{store: st, log: slog.New(slog.DiscardHandler), validate: newValidator()}}
}

// Export returns the stored configuration as a document, format "json" (indented) or
// "yaml".
func (t *ConfigTool) Export(ctx context.Context, format string) ([]byte, error) {
	return t.s.exportConfig(ctx, format)
}

func (s *Server) exportConfig(ctx context.Context, format string) ([]byte, error) {
	cur, err := s.store.ReadConfig(ctx)
	if err != nil {
		return nil, err
	}
	doc := configDocument{Connections: []configConnection{}, ClientKeys: []configClientKey{}}
	if doc.Settings, err = settingsDocument(cur.Settings.Data); err != nil {
		return nil, err
	}
	for _, c := range cur.Connections {
		doc.Connections = append(doc.Connections, configConnectionOf(c))
	}
	for _, k := range cur.ClientKeys {
		doc.ClientKeys = append(doc.ClientKeys, configClientKeyOf(k))
	}
	slices.SortFunc(doc.Connections, func(a, b configConnection) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(doc.ClientKeys, func(a, b configClientKey) int { return strings.Compare(a.Name, b.Name) })
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("handlers: encode config: %w", err)
	}
	switch format {
	case "json":
		return append(out, '\n'), nil
	case "yaml":
		return yamlFromJSON(out)
	}
	return nil, fmt.Errorf("handlers: unknown config format %q", format)
}

// ApplyOptions say how Apply treats a document.
type ApplyOptions struct {
	// DryRun writes nothing and returns the plan.
	DryRun bool
	// Prune deletes the connections and client keys the document does not name (of the
	// lists it declares).
	Prune bool
	// Getenv resolves an apiKey of the form ${NAME} (an empty value is unset). Nil
	// rejects such references: the REST API must not copy the server's environment
	// into an upstream request (see docs/ARCHITECTURE.md).
	Getenv func(string) string
}

// ConfigPlan is what applying a document changes (or, in a dry run, would change).
type ConfigPlan struct {
	Changed bool               `json:"changed"`
	Changes []ConfigPlanChange `json:"changes"`
}

// ConfigPlanChange is one changed entity, its change listed field by field as the
// audit log shows it.
type ConfigPlanChange struct {
	// Entity is "settings", "connection" or "client_key"; Action "create", "update" or
	// "delete" (the audit log's words).
	Entity string `json:"entity"`
	Action string `json:"action"`
	Name   string `json:"name,omitempty"`
	// ID is the entity's id; absent for the settings and for creations in a dry run.
	ID   string           `json:"id,omitempty"`
	Diff []ConfigDiffLine `json:"diff"`
	// Secret is a created client key's secret: in the answer of an applied change
	// only, and never again.
	Secret string `json:"secret,omitempty"`
}

// ConfigDiffLine is one changed leaf, as on the audit page: path, op (added, removed,
// changed) and the compact JSON of the old and new values. An upstream key never shows:
// its line says "(secret)".
type ConfigDiffLine struct {
	Path   string `json:"path"`
	Op     string `json:"op"`
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
}

// secretMark stands for an upstream key in a plan.
const secretMark = "(secret)"

// Apply validates doc (JSON, see ConfigJSON) against the stored state and applies it
// in one transaction (see store.ApplyConfig), returning the plan. Every problem of the
// document is returned at once as limits.FieldErrors, each path prefixed by its place
// ("connections[zai-main].rateLimitOverrides.maxConcurrent"), and nothing is written.
func (t *ConfigTool) Apply(ctx context.Context, actor string, doc []byte, opts ApplyOptions) (ConfigPlan, error) {
	return t.s.applyConfig(ctx, actor, doc, opts)
}

func (s *Server) applyConfig(ctx context.Context, actor string, doc []byte, opts ApplyOptions) (ConfigPlan, error) {
	changes, err := s.store.ApplyConfig(ctx, actor, opts.DryRun, func(cur store.ConfigState) (store.DesiredConfig, error) {
		return s.desiredConfig(doc, cur, opts)
	})
	if err != nil {
		return ConfigPlan{}, err
	}
	plan := ConfigPlan{Changed: len(changes) > 0, Changes: make([]ConfigPlanChange, 0, len(changes))}
	for _, ch := range changes {
		pc, err := planChange(ch)
		if err != nil {
			return ConfigPlan{}, err
		}
		plan.Changes = append(plan.Changes, pc)
	}
	return plan, nil
}

// planChange words one store change for the plan.
func planChange(ch store.ConfigChange) (ConfigPlanChange, error) {
	pc := ConfigPlanChange{Entity: ch.Entity, Action: ch.Action, Name: ch.Name, ID: ch.ID, Secret: ch.Secret}
	view := func(v any) ([]byte, error) {
		var doc any
		switch e := v.(type) {
		case nil:
			return nil, nil
		case json.RawMessage: // the settings' data object
			m, err := settingsDocument(e)
			if err != nil {
				return nil, err
			}
			doc = m
		case store.Connection:
			doc = configConnectionOf(e)
		case store.ClientKey:
			doc = configClientKeyOf(e)
		default:
			return nil, fmt.Errorf("handlers: plan of %T", v)
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, fmt.Errorf("handlers: encode plan: %w", err)
		}
		return b, nil
	}
	before, err := view(ch.Before)
	if err != nil {
		return ConfigPlanChange{}, err
	}
	after, err := view(ch.After)
	if err != nil {
		return ConfigPlanChange{}, err
	}
	pc.Diff = []ConfigDiffLine{}
	for _, d := range web.DiffJSON(before, after) {
		pc.Diff = append(pc.Diff, ConfigDiffLine{Path: d.Path, Op: d.Op, Before: d.Before, After: d.After})
	}
	switch {
	case ch.Entity == store.EntityConnection && ch.Action == store.ActionCreate:
		pc.Diff = append(pc.Diff, ConfigDiffLine{Path: "apiKey", Op: web.DiffAdded, After: secretMark})
	case ch.KeyChanged:
		pc.Diff = append(pc.Diff, ConfigDiffLine{Path: "apiKey", Op: web.DiffChanged, Before: secretMark, After: "(new secret)"})
	}
	slices.SortStableFunc(pc.Diff, func(a, b ConfigDiffLine) int { return strings.Compare(a.Path, b.Path) })
	return pc, nil
}

// Text writes the plan for a terminal, one entity per line followed by its changed
// fields, with the audit page's marks: "+" added, "−" removed, "~" changed.
func (p ConfigPlan) Text() string {
	if !p.Changed {
		return "no changes\n"
	}
	var b strings.Builder
	counts := map[string]int{}
	for _, ch := range p.Changes {
		counts[ch.Action]++
		mark := map[string]string{store.ActionCreate: "+", store.ActionDelete: "−"}[ch.Action]
		if mark == "" {
			mark = "~"
		}
		name := ch.Name
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(&b, "%s %s%s\n", mark, ch.Entity, name)
		for _, d := range ch.Diff {
			path := d.Path
			if path != "" {
				path += ": "
			}
			switch d.Op {
			case web.DiffAdded:
				fmt.Fprintf(&b, "    + %s%s\n", path, d.After)
			case web.DiffRemoved:
				fmt.Fprintf(&b, "    − %s%s\n", path, d.Before)
			default:
				fmt.Fprintf(&b, "    ~ %s%s → %s\n", path, d.Before, d.After)
			}
		}
	}
	fmt.Fprintf(&b, "%d to create, %d to update, %d to delete\n",
		counts[store.ActionCreate], counts[store.ActionUpdate], counts[store.ActionDelete])
	return b.String()
}

// configError is a problem of a configuration document at field, in words.
func configError(field, code, message string) limits.FieldError {
	return limits.FieldError{Field: field, Message: message, Code: code}
}

// under prefixes the paths of errs with place: "" becomes place itself.
func under(place string, errs limits.FieldErrors) limits.FieldErrors {
	out := make(limits.FieldErrors, 0, len(errs))
	for _, e := range errs {
		if e.Field == "" {
			e.Field = place
		} else {
			e.Field = place + "." + e.Field
		}
		out = append(out, e)
	}
	return out
}

// desiredConfig decodes and validates a configuration document against cur: every
// problem together (limits.FieldErrors), or what the store is to make of it.
func (s *Server) desiredConfig(doc []byte, cur store.ConfigState, opts ApplyOptions) (store.DesiredConfig, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(doc, &members); err != nil || members == nil {
		return store.DesiredConfig{}, limits.FieldErrors{fieldError("", limits.CodeNotObject)}
	}
	want := store.DesiredConfig{Prune: opts.Prune}
	var errs limits.FieldErrors
	for _, key := range slices.Sorted(maps.Keys(members)) {
		raw := members[key]
		switch key {
		case "settings":
			data, fe, err := s.desiredSettings(raw, cur.Settings)
			if err != nil {
				return store.DesiredConfig{}, err
			}
			errs = append(errs, fe...)
			want.Settings = data
		case "connections":
			conns, fe, err := s.desiredConnections(raw, cur, opts)
			if err != nil {
				return store.DesiredConfig{}, err
			}
			errs = append(errs, fe...)
			want.Connections, want.DeclaresConnections = conns, true
		case "clientKeys":
			keys, fe, err := s.desiredClientKeys(raw)
			if err != nil {
				return store.DesiredConfig{}, err
			}
			errs = append(errs, fe...)
			want.ClientKeys, want.DeclaresClientKeys = keys, true
		default:
			errs = append(errs, fieldError(key, limits.CodeUnknownField))
		}
	}
	if len(errs) > 0 {
		return store.DesiredConfig{}, limits.SortFieldErrors(errs)
	}
	return want, nil
}

// desiredSettings decodes the document's settings (read-only version and updatedAt
// ignored, as on a PATCH) strictly and returns the data object to store, or nil when the
// settings in force would not change. A key is stored when the document gives it and it
// is stored already or differs from its built-in default, so applying an export never
// pins a default; a key the document leaves out takes its default.
func (s *Server) desiredSettings(raw json.RawMessage, cur store.Settings) (json.RawMessage, limits.FieldErrors, error) {
	if isNullJSON(raw) {
		return nil, limits.FieldErrors{fieldError("settings", limits.CodeNotObject)}, nil
	}
	set, fe := limits.DecodeSettings(withoutKeys(raw, "version", "updatedAt"), "settings")
	if len(fe) > 0 {
		return nil, fe, nil
	}
	given, err := jsonObject(set)
	if err != nil {
		return nil, nil, err
	}
	defaults, err := jsonObject(limits.DefaultSettings())
	if err != nil {
		return nil, nil, err
	}
	stored := map[string]json.RawMessage{}
	if err := json.Unmarshal(cur.Data, &stored); err != nil {
		return nil, nil, fmt.Errorf("handlers: decode stored settings: %w", err)
	}
	out := map[string]json.RawMessage{}
	for k, v := range given {
		if _, ok := stored[k]; ok || !jsonSame(v, defaults[k]) {
			out[k] = v
		}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, nil, fmt.Errorf("handlers: encode settings: %w", err)
	}
	before, err := settingsDocument(cur.Data)
	if err != nil {
		return nil, nil, err
	}
	after, err := settingsDocument(data)
	if err != nil {
		return nil, nil, err
	}
	if b, a := mustJSON(before), mustJSON(after); jsonSame(b, a) {
		return nil, nil, nil
	}
	return data, nil, nil
}

// desiredConnections decodes the document's connections, each with the API's rules
// (decodeConnection: create rules for a name not stored yet), its errors under
// connections[<name>] (connections[<index>] when the name is unusable or repeated).
func (s *Server) desiredConnections(raw json.RawMessage, cur store.ConfigState, opts ApplyOptions) ([]store.ConnectionInput, limits.FieldErrors, error) {
	var elems []json.RawMessage
	if isNullJSON(raw) || json.Unmarshal(raw, &elems) != nil {
		return nil, limits.FieldErrors{configError("connections", codeConfigShape, "must be a list of connections")}, nil
	}
	stored := map[string]bool{}
	for _, c := range cur.Connections {
		stored[c.Name] = true
	}
	var (
		errs  limits.FieldErrors
		out   []store.ConnectionInput
		named = map[string]bool{}
	)
	for i, elem := range elems {
		place := fmt.Sprintf("connections[%d]", i)
		var members map[string]json.RawMessage
		if json.Unmarshal(elem, &members) != nil || members == nil {
			errs = append(errs, configError(place, codeConfigShape, "must be an object (a connection)"))
			continue
		}
		var name string
		if json.Unmarshal(members["name"], &name) == nil && validConnName(name) {
			if named[name] {
				errs = append(errs, configError(place+".name", codeConfigTwice,
					fmt.Sprintf("connection %q is given twice; give each connection once", name)))
				continue
			}
			named[name] = true
			place = "connections[" + name + "]"
		}
		if fe, err := resolveAPIKey(members, opts.Getenv); err != nil {
			return nil, nil, err
		} else if len(fe) > 0 {
			errs = append(errs, under(place, fe)...)
			delete(members, "apiKey")
		}
		body, err := json.Marshal(members)
		if err != nil {
			return nil, nil, fmt.Errorf("handlers: encode connection: %w", err)
		}
		in, err := s.decodeConnection(body, !stored[name])
		var fe limits.FieldErrors
		switch {
		case errors.As(err, &fe):
			errs = append(errs, under(place, fe)...)
			continue
		case err != nil:
			return nil, nil, err
		}
		out = append(out, in)
	}
	return out, errs, nil
}

// resolveAPIKey replaces a connection's apiKey of the form ${NAME} by the value of
// environment variable NAME, through getenv. It reports (at "apiKey") a reference when
// getenv is nil, a variable that is unset or empty, and a key that holds "${" other
// than as one whole reference, since that is a mistyped reference more often than a key.
func resolveAPIKey(members map[string]json.RawMessage, getenv func(string) string) (limits.FieldErrors, error) {
	var key string
	if json.Unmarshal(members["apiKey"], &key) != nil || !strings.Contains(key, "${") {
		return nil, nil
	}
	name, ok := envReference(key)
	switch {
	case !ok:
		return limits.FieldErrors{configError("apiKey", codeConfigEnv,
			"must be the key itself or exactly ${ENV_VAR} (a variable name of A-Z, a-z, 0-9 and _)")}, nil
	case getenv == nil:
		return limits.FieldErrors{configError("apiKey", codeConfigEnv,
			"${"+name+"} is resolved only by the gatehouse config command, never from the server's environment; "+
				"send the key itself, or leave apiKey out to keep the stored key")}, nil
	}
	value := getenv(name)
	if value == "" {
		return limits.FieldErrors{configError("apiKey", codeConfigEnv,
			"environment variable "+name+" is not set (or empty)")}, nil
	}
	b, err := json.Marshal(value)
	if err != nil {
		return nil, fmt.Errorf("handlers: encode apiKey: %w", err)
	}
	members["apiKey"] = b
	return nil, nil
}

// envReference returns NAME when s is exactly ${NAME}.
func envReference(s string) (string, bool) {
	name, ok := strings.CutPrefix(s, "${")
	if !ok {
		return "", false
	}
	if name, ok = strings.CutSuffix(name, "}"); !ok || name == "" {
		return "", false
	}
	for i := range len(name) {
		c := name[i]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return "", false
		}
	}
	return name, true
}

// desiredClientKeys decodes the document's client keys: each in the API's shape
// (name, enabled, limits; decodeClientKey's rules), its problems placed under
// clientKeys[<name>] (or clientKeys[<index>] while it has no usable name).
func (s *Server) desiredClientKeys(raw json.RawMessage) ([]store.ClientKeyInput, limits.FieldErrors, error) {
	var elems []json.RawMessage
	if isNullJSON(raw) || json.Unmarshal(raw, &elems) != nil {
		return nil, limits.FieldErrors{configError("clientKeys", codeConfigShape, "must be a list of client keys")}, nil
	}
	var (
		errs  limits.FieldErrors
		keys  []store.ClientKeyInput
		named = map[string]bool{}
	)
	for i, elem := range elems {
		place := fmt.Sprintf("clientKeys[%d]", i)
		var members map[string]json.RawMessage
		if json.Unmarshal(elem, &members) != nil || members == nil {
			errs = append(errs, configError(place, codeConfigShape, "must be an object (a client key)"))
			continue
		}
		var name string
		if json.Unmarshal(members["name"], &name) == nil && validConnName(name) {
			place = "clientKeys[" + name + "]"
		}
		in, err := s.decodeClientKey(elem, "")
		var fe limits.FieldErrors
		if errors.As(err, &fe) {
			errs = append(errs, under(place, fe)...)
			continue
		} else if err != nil {
			return nil, nil, err
		}
		if named[in.Name] {
			errs = append(errs, configError(fmt.Sprintf("clientKeys[%d].name", i), codeConfigTwice,
				fmt.Sprintf("client key %q is given twice; give each client key once", in.Name)))
			continue
		}
		named[in.Name] = true
		keys = append(keys, in)
	}
	return keys, errs, nil
}

func isNullJSON(raw []byte) bool { return string(bytes.TrimSpace(raw)) == "null" }

// jsonObject marshals v and returns its members.
func jsonObject(v any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("handlers: encode: %w", err)
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("handlers: decode: %w", err)
	}
	return m, nil
}

// mustJSON marshals a value that always marshals (a map of raw JSON).
func mustJSON(v map[string]json.RawMessage) []byte {
	b, _ := json.Marshal(v)
	return b
}

// jsonSame reports whether two JSON documents hold the same value (compared as
// compact, key-sorted JSON).
func jsonSame(a, b []byte) bool {
	ca, errA := canonicalJSON(a)
	cb, errB := canonicalJSON(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

func canonicalJSON(doc []byte) ([]byte, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// getConfig serves GET /api/v1/config (admin): the configuration document, JSON unless
// ?format=yaml or, without format, an Accept that names a YAML type.
func (s *Server) getConfig(w http.ResponseWriter, r *http.Request) error {
	format := r.URL.Query().Get("format")
	switch format {
	case "json", "yaml":
	case "":
		format = "json"
		if acceptsYAML(r.Header.Get("Accept")) {
			format = "yaml"
		}
	default:
		return &apiError{status: http.StatusBadRequest, detail: "invalid query parameters",
			fields: limits.FieldErrors{configError("format", codeConfigShape, `must be "json" or "yaml"`)}}
	}
	out, err := s.exportConfig(r.Context(), format)
	if err != nil {
		return err
	}
	ct := jsonContentType
	if format == "yaml" {
		ct = yamlContentType + "; charset=utf-8"
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
		if mt == jsonContentType {
			return false
		}
	}
	return false
}

// postConfigApply serves POST /api/v1/config/apply[?dryRun=true][&prune=true] (admin):
// a configuration document, JSON or YAML, validated whole (422 with every problem, nothing
// written) and applied in one transaction; the answer is the plan, with a created client
// key's secret shown once. ${ENV_VAR} references are refused (see ApplyOptions.Getenv).
func (s *Server) postConfigApply(w http.ResponseWriter, r *http.Request) error {
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
				errs = append(errs, fieldError(p.name, codeNotBool))
			}
			*p.dst = b
		}
	}
	if len(errs) > 0 {
		return &apiError{status: http.StatusBadRequest, detail: "invalid query parameters", fields: errs}
	}
	doc, err := readConfigBody(w, r)
	if err != nil {
		return err
	}
	plan, err := s.applyConfig(r.Context(), ConfigActorPrefix+strings.TrimPrefix(actor(r), "token:"), doc, opts)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, plan, "")
}

// readConfigBody reads a configuration document declared as JSON (read as every API
// body is) or YAML (converted by ConfigJSON; a syntax error is a 400 naming its line).
func readConfigBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err == nil && mt == jsonContentType {
		return readJSON(w, r, false)
	}
	if err != nil || !slices.Contains(yamlMediaTypes, mt) {
		return nil, newAPIError(http.StatusUnsupportedMediaType, "the request body must be application/json or application/yaml")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
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
		return nil, newAPIError(http.StatusBadRequest, "the request body is not valid YAML: "+se.Error())
	}
	if err != nil {
		return nil, err
	}
	return doc, nil
}
