package session

import (
	"context"
	"time"
)

// Shared keeps what replicas share of their sessions in cluster mode: each
// session's spend against its sessionBudgetUsd, reservations included, and
// whether it ran over it (gateway/cluster's *Limits over Redis). A session
// idle for ttl is forgotten there as here. Every method bounds its own wait;
// an error makes the caller fall back to its own replica's count.
type Shared interface {
	// ReserveSpend adds cost (micro-dollars) to session's spend unless the
	// session ran over its budget before or the sum would pass budget — then
	// it marks the session over budget and reports false — in one atomic
	// step.
	ReserveSpend(ctx context.Context, session string, cost, budget int64, ttl time.Duration) (bool, error)
	// AddSpend adds micros (negative: gives back a reservation's excess) to
	// the spend of a session it still knows.
	AddSpend(ctx context.Context, session string, micros int64, ttl time.Duration) error
	// ResetSession forgets session's spend and hold (an operator resumed it).
	ResetSession(ctx context.Context, session string) error
}
