package alert

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Delivery statuses.
const (
	StatusSending   = "sending"   // claimed, first try under way
	StatusRetrying  = "retrying"  // a try failed; the next waits its backoff
	StatusDelivered = "delivered" // the webhook answered 2xx
	StatusFailed    = "failed"    // given up after the last backoff (1 h)
)

// Delivery is one alert to one webhook, as /alerts lists it.
type Delivery struct {
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

// Claims records deliveries so that each alert is sent once across
// replicas. Package store implements it over Postgres; MemoryClaims keeps
// them in this process.
type Claims interface {
	// Claim records d (status sending) and returns it with its ID, unless
	// a delivery of the same event, subject, condition and webhook was
	// claimed less than cooldown before d.CreatedAt (by any replica): then
	// false. A test alert (EventTest) is always claimed.
	Claim(ctx context.Context, d Delivery, cooldown time.Duration) (Delivery, bool, error)
	// Update records a delivery's status, tries and last error.
	Update(ctx context.Context, id int64, status string, tries int, lastError string, at time.Time) error
	// RecentDeliveries returns the newest deliveries first, at most limit.
	RecentDeliveries(ctx context.Context, limit int) ([]Delivery, error)
}

// MemoryClaims is Claims in this process (one replica, or tests).
type MemoryClaims struct {
	mu   sync.Mutex
	rows []Delivery
}

// Claim implements Claims.
func (m *MemoryClaims) Claim(_ context.Context, d Delivery, cooldown time.Duration) (Delivery, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d.Event != EventTest {
		for _, r := range m.rows {
			if r.Event == d.Event && r.Subject == d.Subject && r.Condition == d.Condition && r.Webhook == d.Webhook &&
				d.CreatedAt.Sub(r.CreatedAt) < cooldown {
				return Delivery{}, false, nil
			}
		}
	}
	d.ID = int64(len(m.rows) + 1)
	d.Status, d.UpdatedAt = StatusSending, d.CreatedAt
	m.rows = append(m.rows, d)
	return d, true, nil
}

// Update implements Claims.
func (m *MemoryClaims) Update(_ context.Context, id int64, status string, tries int, lastError string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id >= 1 && int(id) <= len(m.rows) {
		r := &m.rows[id-1]
		r.Status, r.Tries, r.LastError, r.UpdatedAt = status, tries, lastError, at
	}
	return nil
}

// RecentDeliveries implements Claims.
func (m *MemoryClaims) RecentDeliveries(_ context.Context, limit int) ([]Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := slices.Clone(m.rows)
	slices.Reverse(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
