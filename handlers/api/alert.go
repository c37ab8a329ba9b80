package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// AlertSource is what the handlers need of the alert notifier: the recent
// deliveries (every replica's) and a test alert to one webhook.
type AlertSource interface {
	RecentAlerts(ctx context.Context, limit int) ([]store.AlertDelivery, error)
	// TestAlert sends a test alert to the webhook named webhook, off the
	// request (the delivery is returned as claimed, status sending).
	TestAlert(ctx context.Context, webhook, actor string) (store.AlertDelivery, error)
	// IsNoWebhook reports whether err is TestAlert's for an unknown name.
	IsNoWebhook(err error) bool
}

// recentAlertsLimit is how many deliveries /alerts and GET /api/v1/alerts show.
const recentAlertsLimit = 100

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
		if host := s.deps.UpstreamDeny.check(ctx, w.URL); host != "" {
			errs = append(errs, fieldError(prefix+"alerts."+strconv.Itoa(i)+".url", codeUpstreamDenied, host))
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

// alertsView is the settings' webhooks as the API and the dashboard show
// them: never a secret, only whether one is set.
func alertsView(ws limits.AlertWebhooks) limits.AlertWebhooks {
	out := make(limits.AlertWebhooks, 0, len(ws))
	for _, w := range ws.Clone() {
		w.SecretSet = w.SecretSealed != "" || w.Secret != ""
		w.Secret, w.SecretSealed = "", ""
		out = append(out, w)
	}
	return out
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
	b, err := json.Marshal(alertsView(ws))
	if err != nil {
		return fmt.Errorf("handlers: encode alerts: %w", err)
	}
	m["alerts"] = b
	return nil
}

// alertsJSON is GET /api/v1/alerts: the webhooks (no secrets), the
// cooldown and the recent deliveries, newest first.
type alertsJSON struct {
	Webhooks        limits.AlertWebhooks  `json:"webhooks"`
	AlertCooldownMs int                   `json:"alertCooldownMs"`
	Deliveries      []store.AlertDelivery `json:"deliveries"`
}

// alertsState reads the webhooks and the recent deliveries.
func (s *Server) alertsState(ctx context.Context) (alertsJSON, error) {
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return alertsJSON{}, err
	}
	set, _ := limits.NormalizeSettings(st.Data)
	eff := set.Effective()
	out := alertsJSON{Webhooks: alertsView(eff.Alerts), AlertCooldownMs: eff.AlertCooldownMs, Deliveries: []store.AlertDelivery{}}
	if s.deps.Alerts != nil {
		ds, err := s.deps.Alerts.RecentAlerts(ctx, recentAlertsLimit)
		if err != nil {
			return alertsJSON{}, err
		}
		out.Deliveries = append(out.Deliveries, ds...)
	}
	return out, nil
}

// listAlerts serves GET /api/v1/alerts.
func (s *Server) listAlerts(w http.ResponseWriter, r *http.Request) error {
	v, err := s.alertsState(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, v, "")
}

var errNoWebhook = newAPIError(http.StatusNotFound, "no alert webhook of that name in settings.alerts")

// testAlert serves POST /api/v1/alerts/{webhook}/test (admin): a test
// alert to the webhook, sent off the request; 202 with its delivery.
func (s *Server) testAlert(w http.ResponseWriter, r *http.Request) error {
	d, err := s.sendTestAlert(r.Context(), r.PathValue("webhook"), actor(r))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, d, "")
}

func (s *Server) sendTestAlert(ctx context.Context, webhook, who string) (store.AlertDelivery, error) {
	if s.deps.Alerts == nil {
		return store.AlertDelivery{}, errNoWebhook
	}
	d, err := s.deps.Alerts.TestAlert(ctx, webhook, who)
	if err != nil && s.deps.Alerts.IsNoWebhook(err) {
		return store.AlertDelivery{}, errNoWebhook
	}
	return d, err
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
