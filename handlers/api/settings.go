package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// settingsView renders the settings row as the API shows it: the stored keys, the
// built-in default of every key that is not stored (so a client sees the values in
// force), providers ({} when none), and the read-only version and updatedAt. Only the
// stored keys are written back by a PATCH, so a default shown here is never pinned.
func settingsView(st store.Settings) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(st.Data, &m); err != nil {
		return nil, fmt.Errorf("handlers: decode stored settings: %w", err)
	}
	if err := hideAlertSecrets(m); err != nil {
		return nil, err
	}
	defaults, err := json.Marshal(limits.DefaultSettings())
	if err != nil {
		return nil, fmt.Errorf("handlers: encode default settings: %w", err)
	}
	var dm map[string]json.RawMessage
	if err := json.Unmarshal(defaults, &dm); err != nil {
		return nil, fmt.Errorf("handlers: decode default settings: %w", err)
	}
	for k, v := range dm {
		if _, ok := m[k]; !ok {
			m[k] = v
		}
	}
	if _, ok := m["providers"]; !ok {
		m["providers"] = json.RawMessage("{}")
	}
	v, err := json.Marshal(st.Version)
	if err != nil {
		return nil, fmt.Errorf("handlers: encode settings version: %w", err)
	}
	at, err := json.Marshal(st.UpdatedAt)
	if err != nil {
		return nil, fmt.Errorf("handlers: encode settings time: %w", err)
	}
	m["version"], m["updatedAt"] = v, at
	return m, nil
}

// GetSettings serves GET /api/v1/settings.
func (s *Server) GetSettings(w http.ResponseWriter, r *http.Request) error {
	st, err := s.store.GetSettings(r.Context())
	if err != nil {
		return err
	}
	return s.writeSettings(w, st)
}

func (s *Server) writeSettings(w http.ResponseWriter, st store.Settings) error {
	v, err := settingsView(st)
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, v, etag(st.Version))
}

// PatchSettings serves PATCH /api/v1/settings, a JSON Merge Patch applied to the stored
// settings under the row lock and then decoded strictly by limits.DecodeSettings.
func (s *Server) PatchSettings(w http.ResponseWriter, r *http.Request) error {
	pre := parseIfMatch(r)
	patch, err := httpkit.ReadJSON(w, r, true)
	if err != nil {
		return err
	}
	st, err := s.store.UpdateSettings(r.Context(), httpkit.Actor(r), pre.expected(),
		func(cur store.Settings) (json.RawMessage, error) {
			if !pre.matches(cur.Version) {
				return nil, httpkit.ErrPreconditionFailed()
			}
			merged, err := limits.MergePatch(cur.Data, patch)
			if err != nil {
				return nil, fmt.Errorf("handlers: merge patch: %w", err)
			}
			set, fe := limits.DecodeSettings(withoutKeys(merged, "version", "updatedAt"), "")
			if len(fe) > 0 {
				return nil, fe
			}
			if fe := s.prepareAlerts(r.Context(), &set, cur.Data, ""); len(fe) > 0 {
				return nil, fe
			}
			data, err := json.Marshal(set)
			if err != nil {
				return nil, fmt.Errorf("handlers: encode settings: %w", err)
			}
			return data, nil
		})
	if err != nil {
		return err
	}
	return s.writeSettings(w, st)
}

// withoutKeys returns the JSON object doc without keys (the read-only fields of a
// response, which writes ignore); anything that is not an object
// is returned unchanged for the decoder to reject.
func withoutKeys(doc []byte, keys ...string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return doc
	}
	for _, k := range keys {
		delete(m, k)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return doc
	}
	return out
}
