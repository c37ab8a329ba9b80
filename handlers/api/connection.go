package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// connectionView is a connection as the API shows it: the stored row (never the key,
// only apiKeyPreview) and, when the gateway knows the connection, its live health.
type connectionView struct {
	store.Connection
	Health *healthView `json:"health,omitempty"`
}

// healthView is a connection's health as the gateway sees it. DESIGN.md says the
// connection object of GET /api/v1/gates appears as health on the connection, so it
// carries that object's fields (id, name, health, until, budgets, windows) plus state (the same
// value as health) and reason, which the API has always sent.
type healthView struct {
	ID      string                        `json:"id"`
	Name    string                        `json:"name"`
	Health  string                        `json:"health"`
	State   string                        `json:"state"`
	Until   *time.Time                    `json:"until"`
	Reason  string                        `json:"reason,omitempty"`
	Budgets map[string]httpkit.BudgetView `json:"budgets"`
	Windows []httpkit.WindowView          `json:"windows"`
}

// healthByID returns the live health of every connection the gateway knows.
func (s *Server) healthByID() map[string]*healthView {
	if s.deps.Gates == nil {
		return nil
	}
	snap := s.deps.Gates.Snapshot()
	out := make(map[string]*healthView, len(snap.Connections))
	for _, lc := range snap.Connections {
		c := httpkit.ConnectionLiveOf(lc)
		out[c.ID] = &healthView{
			ID: c.ID, Name: c.Name, Health: c.Health, State: c.Health,
			Until: c.Until, Reason: c.Reason, Budgets: c.Budgets, Windows: c.Windows,
		}
	}
	return out
}

// view pairs c with its live health.
func (s *Server) view(c store.Connection) connectionView {
	return connectionView{Connection: c, Health: s.healthByID()[c.ID]}
}

// ListConnections serves GET /api/v1/connections: every connection, highest priority
// first, then by name, in one page.
func (s *Server) ListConnections(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.store.ListConnections(r.Context())
	if err != nil {
		return err
	}
	health := s.healthByID()
	items := make([]connectionView, 0, len(cs))
	for _, c := range cs {
		items = append(items, connectionView{Connection: c, Health: health[c.ID]})
	}
	return httpkit.WriteJSON(w, http.StatusOK, list[connectionView]{Items: items}, "")
}

// GetConnection serves GET /api/v1/connections/{id}.
func (s *Server) GetConnection(w http.ResponseWriter, r *http.Request) error {
	c, err := s.store.GetConnection(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, s.view(c), etag(c.Version))
}

// CreateConnection serves POST /api/v1/connections.
func (s *Server) CreateConnection(w http.ResponseWriter, r *http.Request) error {
	body, err := httpkit.ReadJSON(w, r, false)
	if err != nil {
		return err
	}
	in, err := s.DecodeConnection(body, true)
	if err != nil {
		return err
	}
	if fe := s.UpstreamErrors(r.Context(), nil, in); len(fe) > 0 {
		return fe
	}
	c, err := s.store.CreateConnection(r.Context(), httpkit.Actor(r), in)
	if err != nil {
		return httpkit.NameTaken(err)
	}
	w.Header().Set("Location", Prefix+"connections/"+c.ID)
	return httpkit.WriteJSON(w, http.StatusCreated, s.view(c), etag(c.Version))
}

// ReplaceConnection serves PUT /api/v1/connections/{id}: the body replaces every
// writable field; an absent apiKey keeps the stored key.
func (s *Server) ReplaceConnection(w http.ResponseWriter, r *http.Request) error {
	pre := parseIfMatch(r)
	body, err := httpkit.ReadJSON(w, r, false)
	if err != nil {
		return err
	}
	in, err := s.DecodeConnection(body, false)
	if err != nil {
		return err
	}
	c, err := s.store.UpdateConnection(r.Context(), httpkit.Actor(r), r.PathValue("id"), pre.expected(),
		func(cur store.Connection) (store.ConnectionInput, error) {
			if !pre.matches(cur.Version) {
				return store.ConnectionInput{}, httpkit.ErrPreconditionFailed()
			}
			if fe := s.UpstreamErrors(r.Context(), &cur, in); len(fe) > 0 {
				return store.ConnectionInput{}, fe
			}
			return in, nil
		})
	if err != nil {
		return httpkit.NameTaken(err)
	}
	return httpkit.WriteJSON(w, http.StatusOK, s.view(c), etag(c.Version))
}

// PatchConnection serves PATCH /api/v1/connections/{id}, a JSON Merge Patch (RFC 7396).
// The patch is applied to the connection as the API shows it inside the store's
// transaction, under the row lock, so concurrent patches of different fields both
// survive; the result is then decoded as strictly as a PUT.
func (s *Server) PatchConnection(w http.ResponseWriter, r *http.Request) error {
	pre := parseIfMatch(r)
	patch, err := httpkit.ReadJSON(w, r, true)
	if err != nil {
		return err
	}
	c, err := s.store.UpdateConnection(r.Context(), httpkit.Actor(r), r.PathValue("id"), pre.expected(),
		func(cur store.Connection) (store.ConnectionInput, error) {
			if !pre.matches(cur.Version) {
				return store.ConnectionInput{}, httpkit.ErrPreconditionFailed()
			}
			doc, err := json.Marshal(cur)
			if err != nil {
				return store.ConnectionInput{}, fmt.Errorf("handlers: encode connection: %w", err)
			}
			merged, err := limits.MergePatch(doc, patch)
			if err != nil {
				return store.ConnectionInput{}, fmt.Errorf("handlers: merge patch: %w", err)
			}
			in, err := s.DecodeConnection(merged, false)
			if err != nil {
				return store.ConnectionInput{}, err
			}
			if fe := s.UpstreamErrors(r.Context(), &cur, in); len(fe) > 0 {
				return store.ConnectionInput{}, fe
			}
			return in, nil
		})
	if err != nil {
		return httpkit.NameTaken(err)
	}
	return httpkit.WriteJSON(w, http.StatusOK, s.view(c), etag(c.Version))
}

// DeleteConnection serves DELETE /api/v1/connections/{id}.
func (s *Server) DeleteConnection(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	pre := parseIfMatch(r)
	expected := pre.expected()
	if pre.present && !pre.any && expected == 0 {
		// Several tags (or none we could have issued): the store checks one version, so
		// pick the current one if it matches; the store still rejects a change since.
		cur, err := s.store.GetConnection(r.Context(), id)
		if err != nil {
			return err
		}
		if !pre.matches(cur.Version) {
			return httpkit.ErrPreconditionFailed()
		}
		expected = cur.Version
	}
	if err := s.store.DeleteConnection(r.Context(), httpkit.Actor(r), id, expected); err != nil {
		return err
	}
	return writeNoContent(w)
}

// ResetConnectionHealth serves POST /api/v1/connections/{id}/health/reset: it clears
// the connection's cooldowns, suspension and breaker in this gateway.
func (s *Server) ResetConnectionHealth(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.store.GetConnection(r.Context(), id); err != nil {
		return err
	}
	if s.deps.Gates == nil || !s.deps.Gates.ResetHealth(r.Context(), id) {
		return httpkit.NewAPIError(http.StatusNotFound, "the gateway has not loaded this connection")
	}
	return writeNoContent(w)
}
