package httpkit

import (
	"context"
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// recentAlertsLimit is how many deliveries /alerts and GET /api/v1/alerts show.
const recentAlertsLimit = 100

// AlertsView is the settings' webhooks as the API and the dashboard show
// them: never a secret, only whether one is set.
func AlertsView(ws limits.AlertWebhooks) limits.AlertWebhooks {
	out := make(limits.AlertWebhooks, 0, len(ws))
	for _, w := range ws.Clone() {
		w.SecretSet = w.SecretSealed != "" || w.Secret != ""
		w.Secret, w.SecretSealed = "", ""
		out = append(out, w)
	}
	return out
}

// alertsJSON is GET /api/v1/alerts: the webhooks (no secrets), the
// cooldown and the recent deliveries, newest first.
type alertsJSON struct {
	Webhooks        limits.AlertWebhooks  `json:"webhooks"`
	AlertCooldownMs int                   `json:"alertCooldownMs"`
	Deliveries      []store.AlertDelivery `json:"deliveries"`
}

// AlertsState reads the webhooks and the recent deliveries.
func (s *Core) AlertsState(ctx context.Context) (alertsJSON, error) {
	st, err := s.store.GetSettings(ctx)
	if err != nil {
		return alertsJSON{}, err
	}
	set, _ := limits.NormalizeSettings(st.Data)
	eff := set.Effective()
	out := alertsJSON{Webhooks: AlertsView(eff.Alerts), AlertCooldownMs: eff.AlertCooldownMs, Deliveries: []store.AlertDelivery{}}
	if s.deps.Alerts != nil {
		ds, err := s.deps.Alerts.RecentAlerts(ctx, recentAlertsLimit)
		if err != nil {
			return alertsJSON{}, err
		}
		out.Deliveries = append(out.Deliveries, ds...)
	}
	return out, nil
}

var ErrNoWebhook = NewAPIError(http.StatusNotFound, "no alert webhook of that name in settings.alerts")

func (s *Core) SendTestAlert(ctx context.Context, webhook, who string) (store.AlertDelivery, error) {
	if s.deps.Alerts == nil {
		return store.AlertDelivery{}, ErrNoWebhook
	}
	d, err := s.deps.Alerts.TestAlert(ctx, webhook, who)
	if err != nil && s.deps.Alerts.IsNoWebhook(err) {
		return store.AlertDelivery{}, ErrNoWebhook
	}
	return d, err
}
