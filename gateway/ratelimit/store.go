package ratelimit

import (
	"context"
	"time"
)

// Store keeps the per-connection state besides the gates that every
// gateway replica shares in cluster mode: the rpm/minTime dispatch
// spacing, the tpm window, upstream cooldowns and suspensions, and learned
// caps (gateway/cluster's *Limits over Redis). Durations are relative to
// the store's clock, so replicas' clocks need not agree. Every method must
// be safe for concurrent use and bound its own wait; an error makes Shared
// fall back to the in-process state. ids are connection ids, or a client
// key's store id (key:<id>) for its spacing and tpm window.
type Store interface {
	// ReserveTurn reserves id's next dispatch turn, spacing after the
	// turn reserved before it, and returns how long until that turn. With
	// budget >= 0 a turn more than budget away is not reserved: ok is false
	// and wait is the time to it.
	ReserveTurn(ctx context.Context, id string, spacing, budget time.Duration) (wait time.Duration, ok bool, err error)
	// View returns id's shared state now; tpm is its tokens-per-minute
	// limit, which pays off debt between windows.
	View(ctx context.Context, id string, tpm int64) (View, error)
	// ReserveTokens adds tokens to id's tpm window if they fit (any amount
	// fits an empty window; else used + tokens ≤ tpm), in one atomic step,
	// and returns whether they were added, the tokens used in the window
	// after the call and the time left in the window.
	ReserveTokens(ctx context.Context, id string, tpm, tokens int64) (ok bool, used int64, left time.Duration, err error)
	// AddTokens charges tokens to id's tpm window (negative: gives back a
	// reservation's excess; the window never goes below zero).
	AddTokens(ctx context.Context, id string, tpm, tokens int64) error
	// CoolDown marks model on connID as cooling for d (never shortening a
	// longer cooldown already there).
	CoolDown(ctx context.Context, connID, model string, d time.Duration) error
	// CoolConnection marks every model on connID as cooling for d (never
	// shortening a longer one already there): the upstream's rate-limit
	// headers said the account is spent.
	CoolConnection(ctx context.Context, connID string, d time.Duration) error
	// Suspend takes connID out of rotation for d.
	Suspend(ctx context.Context, connID string, d time.Duration) error
	// Reset clears connID's cooldowns and suspension.
	Reset(ctx context.Context, connID string) error
	// ShareCap moves the learned (adaptive) cap of gate gateKey on connID
	// from from to to, when the shared value is still from or there is none
	// yet, and returns the shared value after: to, or what another replica
	// set first (which the caller adopts). It holds one learned value per
	// gate for every replica; View returns them in Learned.
	ShareCap(ctx context.Context, connID, gateKey string, from, to int) (int, error)
}

// TurnReturner is a Store that can give a reserved dispatch turn back
// (gateway/cluster's *Limits), as the in-process spacing does: Shared then
// reserves through ReserveTurnToken and Turn.GiveBack returns the turn.
type TurnReturner interface {
	// ReserveTurnToken is ReserveTurn that also returns, for a reserved
	// turn, a token naming it for GiveBackTurn.
	ReserveTurnToken(ctx context.Context, id string, spacing, budget time.Duration) (wait time.Duration, ok bool, token int64, err error)
	// GiveBackTurn returns the turn named by token, reserved with spacing,
	// while no later turn of id has been reserved (never granting a turn
	// twice); otherwise it does nothing.
	GiveBackTurn(ctx context.Context, id string, spacing time.Duration, token int64) error
}

// View is one connection's (or key's) shared state as Store.View reads it.
type View struct {
	// Suspended is how long the connection stays suspended (0: not).
	Suspended time.Duration
	// Cooling is how long each cooling model stays cooling.
	Cooling map[string]time.Duration
	// ConnCooling is how long every model of the connection stays cooling
	// (0: not).
	ConnCooling time.Duration
	// TPMUsed is the tokens charged to the current minute window, debt
	// from earlier windows included.
	TPMUsed int64
	// TPMWindowLeft is the time until the current minute window ends.
	TPMWindowLeft time.Duration
	// Learned holds the learned (adaptive) caps of the connection's gates
	// shared by ShareCap, by gate key; nil when none is.
	Learned map[string]int
}
