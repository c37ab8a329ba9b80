package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// prepareAlerts readies the webhooks of set (decoded from a write) for
// storage against the stored settings data cur: a webhook URL naming or
// resolving to an address of GATEHOUSE_UPSTREAM_DENY is a problem at
// <prefix>alerts.<i>.url (nothing is dialled); a secret given is sealed, and
// a webhook without one keeps the sealed secret of the stored webhook of
// the same name.
func (s *Server) prepareAlerts(ctx context.Context, set *limits.Settings, cur json.RawMessage, prefix string) limits.FieldErrors {
	if len(set.Alerts) == 0 {
		return nil
	}
	var stored struct {
		Alerts limits.AlertWebhooks `json:"alerts"`
	}
	_ = json.Unmarshal(cur, &stored) // stored data decoded before; a bad one keeps no secret
	var errs limits.FieldErrors
	for i := range set.Alerts {
		w := &set.Alerts[i]
		if host := s.deps.UpstreamDeny.Check(ctx, w.URL); host != "" {
			errs = append(errs, httpkit.FieldError(prefix+"alerts."+strconv.Itoa(i)+".url", httpkit.CodeUpstreamDenied, host))
		}
		w.SecretSet = false
		if w.Secret != "" {
			w.SecretSealed, w.Secret = s.store.SealAlertSecret(w.Secret), ""
			continue
		}
		w.SecretSealed = ""
		if old, ok := stored.Alerts.Index(w.Name); ok {
			w.SecretSealed = old.SecretSealed
		}
	}
	return errs
}

// hideAlertSecrets rewrites the "alerts" member of a settings view m
// through alertsView.
func hideAlertSecrets(m map[string]json.RawMessage) error {
	raw, ok := m["alerts"]
	if !ok {
		return nil
	}
	var ws limits.AlertWebhooks
	if err := json.Unmarshal(raw, &ws); err != nil {
		return fmt.Errorf("handlers: decode stored alerts: %w", err)
	}
	b, err := json.Marshal(httpkit.AlertsView(ws))
	if err != nil {
		return fmt.Errorf("handlers: encode alerts: %w", err)
	}
	m["alerts"] = b
	return nil
}

// ListAlerts serves GET /api/v1/alerts.
func (s *Server) ListAlerts(w http.ResponseWriter, r *http.Request) error {
	v, err := s.AlertsState(r.Context())
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, v, "")
}

// TestAlert serves POST /api/v1/alerts/{webhook}/test (admin): a test
// alert to the webhook, sent off the request; 202 with its delivery.
func (s *Server) TestAlert(w http.ResponseWriter, r *http.Request) error {
	d, err := s.SendTestAlert(r.Context(), r.PathValue("webhook"), httpkit.Actor(r))
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusAccepted, d, "")
}

// resolveAlertSecrets replaces a webhook secret of the form ${NAME} in a
// configuration document by the variable's value, under the rules of a
// connection's apiKey (resolveAPIKey), each problem at
// settings.alerts.<i>.secret.
func resolveAlertSecrets(ws limits.AlertWebhooks, opts ApplyOptions) (limits.FieldErrors, error) {
	var errs limits.FieldErrors
	for i := range ws {
		secret, err := json.Marshal(ws[i].Secret)
		if err != nil {
			return nil, fmt.Errorf("handlers: encode alert secret: %w", err)
		}
		members := map[string]json.RawMessage{"apiKey": secret}
		fe, err := resolveAPIKey(members, opts.Getenv, opts.EnvAllow)
		if err != nil {
			return nil, err
		}
		for _, e := range fe {
			e.Field = "settings.alerts." + strconv.Itoa(i) + ".secret"
			errs = append(errs, e)
		}
		if len(fe) == 0 {
			if err := json.Unmarshal(members["apiKey"], &ws[i].Secret); err != nil {
				return nil, fmt.Errorf("handlers: decode alert secret: %w", err)
			}
		}
	}
	return errs, nil
}
