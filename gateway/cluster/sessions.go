package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
)

// Sessions' shared spend (DESIGN.md, "Runaway guards"): under
// <prefix>:{adm}:sess:<session>, a hash with sp = micro-dollars spent and
// reserved and ob = 1 once the session ran over its budget; it expires the
// affinity TTL after its last change, as a session is forgotten after that
// long without a request.

var _ session.Shared = (*Limits)(nil)

func (k keyspace) session(id string) string { return k.root + "sess:" + id }

// sessionReserveScript: KEYS[1] the session; ARGV cost, budget, ttl (ms).
// Returns 1 when the cost was added, 0 when it does not fit (the session is
// then over budget until it expires or is reset).
var sessionReserveScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 'sp', 'ob')
local sp = tonumber(v[1]) or 0
local cost, budget = tonumber(ARGV[1]), tonumber(ARGV[2])
if v[2] or sp + cost > budget then
  redis.call('HSET', KEYS[1], 'ob', '1')
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 0
end
redis.call('HINCRBY', KEYS[1], 'sp', cost)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// sessionAddScript: KEYS[1] the session; ARGV micros, ttl (ms). A session
// that expired meanwhile is not brought back.
var sessionAddScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'sp', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// ReserveSpend implements session.Shared in one script, exact across
// replicas.
func (l *Limits) ReserveSpend(ctx context.Context, id string, cost, budget int64, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	n, err := sessionReserveScript.Run(ctx, l.rdb, []string{l.keys.session(id)}, cost, budget, max(ttl.Milliseconds(), 1)).Int64()
	if err != nil {
		return false, fmt.Errorf("cluster: reserve session spend: %w", err)
	}
	return n == 1, nil
}

// AddSpend implements session.Shared.
func (l *Limits) AddSpend(ctx context.Context, id string, micros int64, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	if err := sessionAddScript.Run(ctx, l.rdb, []string{l.keys.session(id)}, micros, max(ttl.Milliseconds(), 1)).Err(); err != nil {
		return fmt.Errorf("cluster: charge session spend: %w", err)
	}
	return nil
}

// ResetSession implements session.Shared.
func (l *Limits) ResetSession(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	if err := l.rdb.Del(ctx, l.keys.session(id)).Err(); err != nil {
		return fmt.Errorf("cluster: reset session: %w", err)
	}
	return nil
}

var _ session.SharedStops = (*Limits)(nil)

// stops is the hash of stopped sessions: field = session, value = when the
// stop lapses (ms, Redis clock).
func (k keyspace) stops() string { return k.root + "sess-stops" }

// sessionStopScript: KEYS[1] the stops; ARGV session, 1/0, ttl (ms). Lapsed
// stops are dropped on the way.
var sessionStopScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) <= now then redis.call('HDEL', KEYS[1], all[i]) end
end
if ARGV[2] == '1' then
  redis.call('HSET', KEYS[1], ARGV[1], now + tonumber(ARGV[3]))
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
`)

// sessionStopsScript: KEYS[1] the stops; returns the sessions whose stop
// has not lapsed.
var sessionStopsScript = redis.NewScript(`
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) > now then out[#out + 1] = all[i] end
end
return out
`)

// SetStop implements session.SharedStops.
func (l *Limits) SetStop(ctx context.Context, id string, stopped bool, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	flag := "0"
	if stopped {
		flag = "1"
	}
	if err := sessionStopScript.Run(ctx, l.rdb, []string{l.keys.stops()}, id, flag, max(ttl.Milliseconds(), 1)).Err(); err != nil {
		return fmt.Errorf("cluster: set session stop: %w", err)
	}
	return nil
}

// Stops implements session.SharedStops.
func (l *Limits) Stops(ctx context.Context) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	ids, err := sessionStopsScript.Run(ctx, l.rdb, []string{l.keys.stops()}).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("cluster: read session stops: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
