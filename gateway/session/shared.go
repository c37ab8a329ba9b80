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

// SharedStops is a Shared that also shares operators' stops (gateway/cluster's
// *Limits): a session stopped on one replica is refused on every replica
// within StopsRefresh.
type SharedStops interface {
	// SetStop records (stopped) or clears session's stop; a stop lapses
	// after ttl.
	SetStop(ctx context.Context, session string, stopped bool, ttl time.Duration) error
	// Stops returns the sessions stopped now.
	Stops(ctx context.Context) (map[string]bool, error)
}

// StopsRefresh is how often a replica reads the shared stops, at most: the
// first request after it has passed reads them, the others use the copy.
const StopsRefresh = time.Second
