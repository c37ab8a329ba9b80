package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
)

// LimitsOptions configures Limits. Client is required.
type LimitsOptions struct {
	// Client is the Redis connection; the caller owns it.
	Client redis.UniversalClient
	// Prefix starts every key (default "gatehouse"); replicas that share
	// limits must share it. It must not contain braces.
	Prefix string
	// OpTimeout bounds every Redis call (default 1s).
	OpTimeout time.Duration
}

// Limits keeps the rate-limit and upstream-health state that gateway
// replicas share in cluster mode: the rpm/minTime dispatch spacing, the tpm
// window, cooldowns after upstream 429s (per model) and rate-limit headers
// (the whole connection), and suspensions after 401/403. It
// implements ratelimit.Store; every call is one script (or one DEL) on
// Redis's clock, bounded by OpTimeout. It is safe for concurrent use and
// runs no goroutines.
//
// Keys, per connection id C, under the same "{adm}" hash tag as admission:
//
//	<prefix>:{adm}:turn:C   string: next free dispatch time (µs, Redis clock)
//	<prefix>:{adm}:tpm:C    hash: m = window start (ms), u = tokens used
//	<prefix>:{adm}:hl:C     hash: s = suspended until, c = every model cooling until,
//	                        m:<model> = cooling until (ms)
//	<prefix>:{adm}:learn:C  hash: <gate key> = learned (adaptive) cap; expires
//	                        LearnedTTL after its last change
//
// The gateway keeps a client key's rpm turn and tpm window the same way,
// under the id "key:<key id>" (no clash with connection ids).
type Limits struct {
	rdb       redis.UniversalClient
	keys      keyspace
	opTimeout time.Duration
}

var _ ratelimit.Store = (*Limits)(nil)

// NewLimits returns Limits over opts.Client.
func NewLimits(opts LimitsOptions) (*Limits, error) {
	if opts.Client == nil {
		return nil, errors.New("cluster: LimitsOptions.Client is nil")
	}
	prefix := cmp.Or(opts.Prefix, DefaultPrefix)
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("cluster: prefix %q contains a brace", prefix)
	}
	return &Limits{rdb: opts.Client, keys: newKeyspace(prefix), opTimeout: cmp.Or(opts.OpTimeout, DefaultOpTimeout)}, nil
}

func (k keyspace) turn(conn string) string   { return k.root + "turn:" + conn }
func (k keyspace) tpm(conn string) string    { return k.root + "tpm:" + conn }
func (k keyspace) health(conn string) string { return k.root + "hl:" + conn }
func (k keyspace) learn(conn string) string  { return k.root + "learn:" + conn }

// LearnedTTL is how long a connection's learned caps stay in Redis after
// their last change: long enough for a limit that holds, short enough that
// a gate no longer adaptive does not linger (a replica that still learns it
// writes it again at its next change).
const LearnedTTL = 24 * time.Hour

// suspendField, connCoolField and modelField name the entries of the
// health hash.
const (
	suspendField  = "s"
	connCoolField = "c"
)

func modelField(model string) string { return "m:" + model }

// ReserveTurn implements ratelimit.Store: it reserves connID's next
// dispatch turn, spacing after the one before, unless it is more than budget
// (when >= 0) away.
func (l *Limits) ReserveTurn(ctx context.Context, connID string, spacing, budget time.Duration) (time.Duration, bool, error) {
	wait, ok, _, err := l.ReserveTurnToken(ctx, connID, spacing, budget)
	return wait, ok, err
}

var _ ratelimit.TurnReturner = (*Limits)(nil)

// ReserveTurnToken implements ratelimit.TurnReturner: ReserveTurn, and the
// next free time the reservation set (µs on Redis's clock) as the token
// that GiveBackTurn takes.
func (l *Limits) ReserveTurnToken(ctx context.Context, connID string, spacing, budget time.Duration) (time.Duration, bool, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	b := int64(-1)
	if budget >= 0 {
		b = budget.Microseconds()
	}
	v, err := turnScript.Run(ctx, l.rdb, []string{l.keys.turn(connID)}, spacing.Microseconds(), b).Int64Slice()
	if err != nil {
		return 0, false, 0, fmt.Errorf("cluster: reserve turn: %w", err)
	}
	if len(v) != 3 {
		return 0, false, 0, fmt.Errorf("cluster: reserve turn: unexpected reply %v", v)
	}
	return time.Duration(v[1]) * time.Microsecond, v[0] == 1, v[2], nil
}

// GiveBackTurn implements ratelimit.TurnReturner: the turn reserved with
// token goes back (turnback.lua) while no later turn of connID was reserved.
// It is not bound to the caller's context beyond its values: a give-back
// outlives the client whose attempt ended.
func (l *Limits) GiveBackTurn(ctx context.Context, connID string, spacing time.Duration, token int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opTimeout)
	defer cancel()
	if err := turnbackScript.Run(ctx, l.rdb, []string{l.keys.turn(connID)}, token, spacing.Microseconds()).Err(); err != nil {
		return fmt.Errorf("cluster: give back turn: %w", err)
	}
	return nil
}

// View implements ratelimit.Store: connID's suspension, cooldowns and
// tpm window now, in one read-only script.
func (l *Limits) View(ctx context.Context, connID string, tpm int64) (ratelimit.View, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	var v ratelimit.View
	raw, err := peekScript.Run(ctx, l.rdb, []string{l.keys.health(connID), l.keys.tpm(connID), l.keys.learn(connID)}, tpm).Slice()
	if err != nil {
		return v, fmt.Errorf("cluster: read shared limits: %w", err)
	}
	if len(raw) < 2 || len(raw)%2 != 0 {
		return v, fmt.Errorf("cluster: read shared limits: unexpected reply of %d values", len(raw))
	}
	used, _ := raw[0].(int64)
	left, _ := raw[1].(int64)
	v.TPMUsed, v.TPMWindowLeft = used, time.Duration(left)*time.Millisecond
	for i := 2; i+1 < len(raw); i += 2 {
		field, _ := raw[i].(string)
		ms, _ := raw[i+1].(int64)
		d := time.Duration(ms) * time.Millisecond
		switch {
		case strings.HasPrefix(field, "l:"):
			if v.Learned == nil {
				v.Learned = make(map[string]int)
			}
			v.Learned[field[2:]] = int(ms)
		case field == suspendField:
			v.Suspended = d
		case field == connCoolField:
			v.ConnCooling = d
		case strings.HasPrefix(field, "m:"):
			if v.Cooling == nil {
				v.Cooling = make(map[string]time.Duration)
			}
			v.Cooling[field[2:]] = d
		}
	}
	return v, nil
}

// AddTokens implements ratelimit.Store: it charges tokens to connID's
// tpm window.
func (l *Limits) AddTokens(ctx context.Context, connID string, tpm, tokens int64) error {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	if err := tokensScript.Run(ctx, l.rdb, []string{l.keys.tpm(connID)}, tpm, tokens).Err(); err != nil {
		return fmt.Errorf("cluster: charge tokens: %w", err)
	}
	return nil
}

// ReserveTokens implements ratelimit.Store: it reserves tokens in connID's tpm window when they fit (an
// empty window takes any reservation, else used + tokens must stay within
// tpm), in one script, exact across replicas. It returns whether they were
// reserved, the tokens used in the window after the call, and the time left
// in the window. A reservation is settled with AddTokens(actual − tokens).
func (l *Limits) ReserveTokens(ctx context.Context, connID string, tpm, tokens int64) (ok bool, used int64, left time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	v, err := tokensScript.Run(ctx, l.rdb, []string{l.keys.tpm(connID)}, tpm, tokens, 1).Int64Slice()
	if err != nil {
		return false, 0, 0, fmt.Errorf("cluster: reserve tokens: %w", err)
	}
	if len(v) != 3 {
		return false, 0, 0, fmt.Errorf("cluster: reserve tokens: unexpected reply %v", v)
	}
	return v[0] == 1, v[1], time.Duration(v[2]) * time.Millisecond, nil
}

// CoolDown implements ratelimit.Store: model on connID cools for d.
func (l *Limits) CoolDown(ctx context.Context, connID, model string, d time.Duration) error {
	return l.mark(ctx, connID, modelField(model), d)
}

// CoolConnection implements ratelimit.Store: every model on connID
// cools for d.
func (l *Limits) CoolConnection(ctx context.Context, connID string, d time.Duration) error {
	return l.mark(ctx, connID, connCoolField, d)
}

// Suspend implements ratelimit.Store: connID is suspended for d.
func (l *Limits) Suspend(ctx context.Context, connID string, d time.Duration) error {
	return l.mark(ctx, connID, suspendField, d)
}

func (l *Limits) mark(ctx context.Context, connID, field string, d time.Duration) error {
	ms := max(d.Milliseconds(), 1)
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	if err := markScript.Run(ctx, l.rdb, []string{l.keys.health(connID)}, field, ms).Err(); err != nil {
		return fmt.Errorf("cluster: mark %s: %w", field, err)
	}
	return nil
}

// Reset implements ratelimit.Store: it clears connID's cooldowns and
// suspension.
func (l *Limits) Reset(ctx context.Context, connID string) error {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	if err := l.rdb.Del(ctx, l.keys.health(connID)).Err(); err != nil {
		return fmt.Errorf("cluster: reset health: %w", err)
	}
	return nil
}

// ShareCap implements ratelimit.Store: the learned cap of gateKey on
// connID moves from from to to, unless another replica moved it first.
func (l *Limits) ShareCap(ctx context.Context, connID, gateKey string, from, to int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	n, err := learnScript.Run(ctx, l.rdb, []string{l.keys.learn(connID)}, gateKey, from, to, LearnedTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("cluster: share learned cap: %w", err)
	}
	return int(n), nil
}
