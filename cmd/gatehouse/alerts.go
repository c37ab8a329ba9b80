package main

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
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

// alertWatchInterval is how often serve looks for the alert conditions
// that no request decides: a learned cap cut, request-log rows dropped,
// Redis away.
const alertWatchInterval = 10 * time.Second

// alertWatch turns the state serve watches into alert events. Each field
// may be nil (not watched). check is called on every tick.
type alertWatch struct {
	emit     func(alert.Event)
	snapshot func() live.Snapshot
	dropped  func() int64 // request-log rows dropped so far
	degraded func() bool  // cluster mode: Redis away
	// drops remembers the dropped count of each tick of the last minute.
	drops []dropMark
}

type dropMark struct {
	at time.Time
	n  int64
}

func (w *alertWatch) check(now time.Time) {
	if w.snapshot != nil {
		for _, g := range w.snapshot().Gates {
			if g.Shadow || !g.Adaptive || g.Cap <= 0 || g.EffectiveCap <= 0 || g.EffectiveCap*2 > g.Cap {
				continue
			}
			w.emit(alert.Event{Name: limits.AlertLearnedCut, Subject: g.Key, Condition: "half or less",
				Severity: alert.SeverityWarning, At: now, Path: "/",
				Summary: fmt.Sprintf("Gate %s runs at a learned cap of %d, half or less of its configured %d", g.Key, g.EffectiveCap, g.Cap),
				Details: map[string]any{"gate": g.Key, "connectionId": g.ConnectionID, "model": g.Model,
					"cap": g.Cap, "effectiveCap": g.EffectiveCap}})
		}
	}
	if w.dropped != nil {
		n := w.dropped()
		w.drops = append(w.drops, dropMark{at: now, n: n})
		for len(w.drops) > 1 && now.Sub(w.drops[0].at) > time.Minute {
			w.drops = w.drops[1:]
		}
		if d := n - w.drops[0].n; d > 0 {
			w.emit(alert.Event{Name: limits.AlertRequestLogDrop, Subject: "request log", Condition: "dropped",
				Severity: alert.SeverityWarning, At: now, Path: "/requests",
				Summary: fmt.Sprintf("The request log dropped %d rows in the last minute (the database away or slow)", d),
				Details: map[string]any{"dropped": d}})
		}
	}
	if w.degraded != nil && w.degraded() {
		w.emit(alert.Event{Name: limits.AlertClusterDegraded, Subject: "redis", Condition: "away",
			Severity: alert.SeverityCritical, At: now, Path: "/",
			Summary: "Cluster mode: Redis is unavailable; replicas fall back to their fail mode"})
	}
}

// run checks every alertWatchInterval until ctx ends.
func (w *alertWatch) run(ctx context.Context) {
	t := time.NewTicker(alertWatchInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			w.check(now)
		}
	}
}
