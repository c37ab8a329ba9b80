package main

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/store"
)

// alertClaims is alert.Claims over the store's alert_deliveries: each
// alert is claimed by one replica.
type alertClaims struct{ st *store.Store }

func (c alertClaims) Claim(ctx context.Context, d alert.Delivery, cooldown time.Duration) (alert.Delivery, bool, error) {
	got, ok, err := c.st.ClaimAlert(ctx, store.AlertDelivery(d), cooldown)
	return alert.Delivery(got), ok, err
}

func (c alertClaims) Update(ctx context.Context, id int64, status string, tries int, lastError string, at time.Time) error {
	return c.st.UpdateAlert(ctx, id, status, tries, lastError, at)
}

func (c alertClaims) RecentDeliveries(ctx context.Context, limit int) ([]alert.Delivery, error) {
	ds, err := c.st.RecentAlerts(ctx, limit)
	out := make([]alert.Delivery, len(ds))
	for i, d := range ds {
		out[i] = alert.Delivery(d)
	}
	return out, err
}

// alertSource is what the dashboard and API need of the notifier
// (handlers.AlertSource).
type alertSource struct {
	n  *alert.Notifier
	st *store.Store
}

func (a alertSource) RecentAlerts(ctx context.Context, limit int) ([]store.AlertDelivery, error) {
	return a.st.RecentAlerts(ctx, limit)
}

func (a alertSource) TestAlert(ctx context.Context, webhook, actor string) (store.AlertDelivery, error) {
	d, err := a.n.Test(ctx, webhook, actor)
	return store.AlertDelivery(d), err
}

func (a alertSource) IsNoWebhook(err error) bool { return err == alert.ErrNoWebhook }
