package alert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
)

// deliver sends e to h until it is answered 2xx, waiting FirstBackoff
// after the first failed try and twice as long after each next one; when
// the next wait would pass MaxBackoff, or the address is on the deny list,
// it gives up. Each outcome is recorded on d.
func (n *Notifier) deliver(e Event, h hook, d Delivery) {
	defer n.wg.Done()
	body, err := Body(&e, h.Format, n.dashboardURL(&e))
	if err != nil {
		n.finish(d, StatusFailed, 0, "encode: "+err.Error())
		return
	}
	wait := FirstBackoff
	for tries := 1; ; tries++ {
		err := n.try(h, body)
		if err == nil {
			n.finish(d, StatusDelivered, tries, "")
			return
		}
		// A denied address stays denied: no retry dials it again.
		var denied *outbound.DeniedError
		if wait > MaxBackoff || n.ctx.Err() != nil || errors.As(err, &denied) {
			n.finish(d, StatusFailed, tries, err.Error())
			n.log.Warn("alert: delivery given up", slog.String("event", e.Name), slog.String("webhook", h.Name),
				slog.Int("tries", tries), slog.Any("error", err))
			return
		}
		n.finish(d, StatusRetrying, tries, err.Error())
		if n.sleep(n.ctx, wait) != nil {
			n.finish(d, StatusFailed, tries, err.Error()+" (gateway shut down before the next try)")
			return
		}
		wait *= 2
	}
}

func (n *Notifier) dashboardURL(e *Event) string {
	if n.dash == "" {
		return ""
	}
	return n.dash + e.Path
}

// try sends body once; nil when the webhook answered 2xx.
func (n *Notifier) try(h hook, body []byte) error {
	req, err := http.NewRequestWithContext(n.ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Gatehouse-Alerts")
	if h.secret != "" {
		ts, sig := Sign(h.secret, n.now(), body)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, sig)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
	return nil
}

func (n *Notifier) finish(d Delivery, status string, tries int, lastError string) {
	n.m.deliveries.WithLabelValues(status).Inc()
	// The record outlives a shutdown that interrupts the delivery.
	ctx := context.WithoutCancel(n.ctx)
	if err := n.claims.Update(ctx, d.ID, status, tries, lastError, n.now()); err != nil {
		n.log.Error("alert: record a delivery", slog.Int64("id", d.ID), slog.Any("error", err))
	}
}

type metrics struct {
	emitted    *prometheus.CounterVec
	dropped    prometheus.Counter
	deliveries *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		emitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gatehouse_alerts_emitted_total",
			Help: "Alert events queued for sending, by event (after this replica's cooldown)."}, []string{"event"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "gatehouse_alerts_dropped_total",
			Help: "Alert events dropped because the send queue was full."}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gatehouse_alert_deliveries_total",
			Help: "Webhook delivery outcomes: delivered, retrying (a try failed), failed (given up)."}, []string{"status"}),
	}
	if reg != nil {
		reg.MustRegister(m.emitted, m.dropped, m.deliveries)
	}
	return m
}
