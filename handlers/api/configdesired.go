package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

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
func (s *Server) desiredConfig(ctx context.Context, doc []byte, cur store.ConfigState, opts ApplyOptions) (store.DesiredConfig, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(doc, &members); err != nil || members == nil {
		return store.DesiredConfig{}, limits.FieldErrors{httpkit.FieldError("", limits.CodeNotObject)}
	}
	want := store.DesiredConfig{Prune: opts.Prune}
	var errs limits.FieldErrors
	for _, key := range slices.Sorted(maps.Keys(members)) {
		raw := members[key]
		switch key {
		case "settings":
			data, fe, err := s.desiredSettings(ctx, raw, cur.Settings, opts)
			if err != nil {
				return store.DesiredConfig{}, err
			}
			errs = append(errs, fe...)
			want.Settings = data
		case "connections":
			conns, fe, err := s.desiredConnections(ctx, raw, cur, opts)
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
			errs = append(errs, httpkit.FieldError(key, limits.CodeUnknownField))
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
func (s *Server) desiredSettings(ctx context.Context, raw json.RawMessage, cur store.Settings, opts ApplyOptions) (json.RawMessage, limits.FieldErrors, error) {
	if isNullJSON(raw) {
		return nil, limits.FieldErrors{httpkit.FieldError("settings", limits.CodeNotObject)}, nil
	}
	set, fe := limits.DecodeSettings(withoutKeys(raw, "version", "updatedAt"), "settings")
	if len(fe) > 0 {
		return nil, fe, nil
	}
	if fe, err := resolveAlertSecrets(set.Alerts, opts); len(fe) > 0 || err != nil {
		return nil, fe, err
	}
	if fe := s.prepareAlerts(ctx, &set, cur.Data, "settings."); len(fe) > 0 {
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
func (s *Server) desiredConnections(ctx context.Context, raw json.RawMessage, cur store.ConfigState, opts ApplyOptions) ([]store.ConnectionInput, limits.FieldErrors, error) {
	var elems []json.RawMessage
	if isNullJSON(raw) || json.Unmarshal(raw, &elems) != nil {
		return nil, limits.FieldErrors{configError("connections", codeConfigShape, "must be a list of connections")}, nil
	}
	stored := map[string]*store.Connection{}
	for i, c := range cur.Connections {
		stored[c.Name] = &cur.Connections[i]
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
		if json.Unmarshal(members["name"], &name) == nil && httpkit.ValidConnName(name) {
			if named[name] {
				errs = append(errs, configError(place+".name", codeConfigTwice,
					fmt.Sprintf("connection %q is given twice; give each connection once", name)))
				continue
			}
			named[name] = true
			place = "connections[" + name + "]"
		}
		if fe, err := resolveAPIKey(members, opts.Getenv, opts.EnvAllow); err != nil {
			return nil, nil, err
		} else if len(fe) > 0 {
			errs = append(errs, under(place, fe)...)
			delete(members, "apiKey")
		}
		body, err := json.Marshal(members)
		if err != nil {
			return nil, nil, fmt.Errorf("handlers: encode connection: %w", err)
		}
		in, err := s.DecodeConnection(body, stored[name] == nil)
		var fe limits.FieldErrors
		switch {
		case errors.As(err, &fe):
			errs = append(errs, under(place, fe)...)
			continue
		case err != nil:
			return nil, nil, err
		}
		if fe := s.UpstreamErrors(ctx, stored[name], in); len(fe) > 0 {
			errs = append(errs, under(place, fe)...)
			continue
		}
		out = append(out, in)
	}
	return out, errs, nil
}

// resolveAPIKey replaces a connection's apiKey of the form ${NAME} by the value of
// environment variable NAME, through getenv. It reports (at "apiKey") a reference when
// getenv is nil, a variable it may not read (envAllowed), a variable that is unset or
// empty, and a key that holds "${" other
// than as one whole reference, since that is a mistyped reference more often than a key.
func resolveAPIKey(members map[string]json.RawMessage, getenv func(string) string, allow []string) (limits.FieldErrors, error) {
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
	if !envAllowed(name, allow) {
		return limits.FieldErrors{configError("apiKey", codeConfigEnv,
			"${"+name+"} may not be read: an apiKey reads only variables named GATEHOUSE_SECRET_* "+
				"(never GATEHOUSE_SECRET_KEY) or listed in --env-allow")}, nil
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
// envAllowed reports whether an apiKey's ${name} may read variable name: one named
// GATEHOUSE_SECRET_* other than GATEHOUSE_SECRET_KEY (the installation secret), or one
// the operator listed. Any other variable of the CLI's environment — the admin
// password, the database URL — must never become a key sent to an upstream.
func envAllowed(name string, allow []string) bool {
	if slices.Contains(allow, name) {
		return true
	}
	return strings.HasPrefix(name, "GATEHOUSE_SECRET_") && name != "GATEHOUSE_SECRET_KEY"
}

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
		if json.Unmarshal(members["name"], &name) == nil && httpkit.ValidConnName(name) {
			place = "clientKeys[" + name + "]"
		}
		in, err := s.DecodeClientKey(elem, "")
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
