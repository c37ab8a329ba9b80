package ratelimit

import (
	"context"
	"time"
)

// Local keeps the spacing and the tpm window in this process alone: each
// method is the State's own, and the shared side of health does nothing.
type Local struct{}

// Unavailable reports nothing: a replica on its own has no shared health.
func (Local) Unavailable(context.Context, string, *State, int64, string, time.Time) (time.Time, bool) {
	return time.Time{}, false
}

// Blocked is r.Blocked.
func (Local) Blocked(_ context.Context, _ string, l *Limits, r *State, now time.Time) (Block, bool) {
	return r.Blocked(l, now)
}

// TurnDelay is r.TurnDelay.
func (Local) TurnDelay(r *State, now time.Time) time.Duration { return r.TurnDelay(now) }

// Turn is r.Turn.
func (Local) Turn(ctx context.Context, _ string, r *State, _ time.Duration, start time.Time, maxWait time.Duration) Turn {
	return r.Turn(ctx, start, maxWait)
}

// CoolDown does nothing: the connection's health keeps the cooldown.
func (Local) CoolDown(context.Context, string, string, time.Duration) {}

// CoolConnection does nothing: the connection's health keeps the cooldown.
func (Local) CoolConnection(context.Context, string, time.Duration) {}

// Suspend does nothing: the connection's health keeps the suspension.
func (Local) Suspend(context.Context, string, time.Duration) {}

// Reset does nothing: the caller resets the connection's health.
func (Local) Reset(context.Context, string, *State) {}
