package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/store"
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

// NewConfigTool returns a ConfigTool over st, without the dashboard's state; deny is
// GATEHOUSE_UPSTREAM_DENY for the connections it writes.
func NewConfigTool(st *store.Store, deny httpkit.UpstreamDeny) *ConfigTool {
	return &ConfigTool{s: New(httpkit.NewCore(httpkit.Deps{Store: st, UpstreamDeny: deny}))}
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
