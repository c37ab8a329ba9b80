package store

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// AlertDelivery is one alert sent to one webhook: a row of
// alert_deliveries (the fields of gateway/alert's Delivery, which cmd
// converts to and from).
type AlertDelivery struct {
	ID        int64     `json:"id"`
	Event     string    `json:"event"`
	Subject   string    `json:"subject"`
	Condition string    `json:"condition"`
	Webhook   string    `json:"webhook"`
	Severity  string    `json:"severity"`
	Summary   string    `json:"summary"`
	Status    string    `json:"status"`
	Tries     int       `json:"tries"`
	LastError string    `json:"lastError,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// AlertTestEvent is the event of a test alert, which a claim never refuses.
const AlertTestEvent = "test"

// AlertStatusSending is the status of a delivery just claimed.
const AlertStatusSending = "sending"

const claimAlertLockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 7142))`

const claimAlertSeenSQL = `
SELECT EXISTS (SELECT 1 FROM alert_deliveries
WHERE event = $1 AND subject = $2 AND condition = $3 AND webhook = $4 AND created_at > $5)`

// AlertRetention is how long a delivery row is kept: each claim deletes
// the rows older than that.
const AlertRetention = 30 * 24 * time.Hour

const pruneAlertsSQL = `DELETE FROM alert_deliveries WHERE created_at < $1`

const claimAlertInsertSQL = `
INSERT INTO alert_deliveries (event, subject, condition, webhook, severity, summary, status, tries, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $8)
RETURNING id`

// ClaimAlert records d unless a delivery of the
// same event, subject, condition and webhook was created less than cooldown
// before d.CreatedAt — by any replica: the check and the insert hold an
// advisory lock on the four, so two replicas claiming at once get one row.
// A test alert (AlertTestEvent) is always recorded.
func (s *Store) ClaimAlert(ctx context.Context, d AlertDelivery, cooldown time.Duration) (AlertDelivery, bool, error) {
	claimed := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if d.Event != AlertTestEvent {
			key := strconv.Quote(d.Event) + strconv.Quote(d.Subject) + strconv.Quote(d.Condition) + strconv.Quote(d.Webhook)
			if _, err := tx.Exec(ctx, claimAlertLockSQL, key); err != nil {
				return err
			}
			var seen bool
			if err := tx.QueryRow(ctx, claimAlertSeenSQL, d.Event, d.Subject, d.Condition, d.Webhook,
				d.CreatedAt.Add(-cooldown)).Scan(&seen); err != nil || seen {
				return err
			}
		}
		if _, err := tx.Exec(ctx, pruneAlertsSQL, d.CreatedAt.Add(-AlertRetention)); err != nil {
			return err
		}
		d.Status, d.Tries, d.UpdatedAt = AlertStatusSending, 0, d.CreatedAt
		claimed = true
		return tx.QueryRow(ctx, claimAlertInsertSQL, d.Event, d.Subject, d.Condition, d.Webhook, d.Severity,
			d.Summary, d.Status, d.CreatedAt).Scan(&d.ID)
	})
	if err != nil {
		return AlertDelivery{}, false, fmt.Errorf("store: claim alert %s: %w", d.Event, translate(err))
	}
	if !claimed {
		return AlertDelivery{}, false, nil
	}
	return d, true, nil
}

const updateAlertSQL = `
UPDATE alert_deliveries SET status = $2, tries = $3, last_error = $4, updated_at = $5 WHERE id = $1`

// UpdateAlert records a delivery's status, tries and last error.
func (s *Store) UpdateAlert(ctx context.Context, id int64, status string, tries int, lastError string, at time.Time) error {
	if _, err := s.db.Exec(ctx, updateAlertSQL, id, status, tries, lastError, at); err != nil {
		return fmt.Errorf("store: update alert delivery %d: %w", id, translate(err))
	}
	return nil
}

const recentAlertsSQL = `
SELECT id, event, subject, condition, webhook, severity, summary, status, tries, last_error, created_at, updated_at
FROM alert_deliveries ORDER BY created_at DESC, id DESC LIMIT $1`

// RecentAlerts returns the newest deliveries first, at most limit.
func (s *Store) RecentAlerts(ctx context.Context, limit int) ([]AlertDelivery, error) {
	rows, err := s.db.Query(ctx, recentAlertsSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list alert deliveries: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AlertDelivery, error) {
		var d AlertDelivery
		err := r.Scan(&d.ID, &d.Event, &d.Subject, &d.Condition, &d.Webhook, &d.Severity, &d.Summary,
			&d.Status, &d.Tries, &d.LastError, &d.CreatedAt, &d.UpdatedAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list alert deliveries: %w", translate(err))
	}
	return out, nil
}

// SealAlertSecret encrypts an alert webhook's secret as a connection's
// upstream key is, for the settings' secretSealed (base64).
func (s *Store) SealAlertSecret(secret string) string {
	return base64.StdEncoding.EncodeToString(s.seal(secret))
}

// OpenAlertSecret reverses SealAlertSecret.
func (s *Store) OpenAlertSecret(sealed string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return "", fmt.Errorf("store: alert secret is not base64: %w", err)
	}
	return s.open(b)
}

// auditedSettings is settings data as the audit log keeps it: an alert
// webhook's sealed secret is replaced by "(set)", so that neither the
// secret nor its ciphertext leaves the settings row (a change of secret
// still shows). Data that is not the expected shape is kept as it is.
func auditedSettings(data json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil || m["alerts"] == nil {
		return data
	}
	var hooks []map[string]json.RawMessage
	if json.Unmarshal(m["alerts"], &hooks) != nil {
		return data
	}
	for i, h := range hooks {
		if _, ok := h["secretSealed"]; ok {
			mark := "(set)"
			if i := sealedMark(h["secretSealed"]); i != "" {
				mark = "(set " + i + ")"
			}
			h["secretSealed"], _ = json.Marshal(mark)
		}
		hooks[i] = h
	}
	b, err := json.Marshal(hooks)
	if err != nil {
		return data
	}
	m["alerts"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return data
	}
	return out
}

// sealedMark tells two sealed secrets apart in the audit log without
// showing either: the first 8 hex digits of the SHA-256 of the ciphertext
// (a fresh nonce each time, so it says "changed", never what).
func sealedMark(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil || s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}
