-- acquire: one admission attempt for a whole path, all or nothing.
--
-- KEYS[1]  ticket counter (INCR gives every new waiter its place)
-- KEYS[2]  waiters of the request's queue gate (zset member -> expiry ms)
-- for gate i (1-based): KEYS[3i] holders (member -> lease expiry ms),
--                       KEYS[3i+1] queue (member -> ticket),
--                       KEYS[3i+2] queue expiries (member -> expiry ms)
-- ARGV[1] member (lease id, also the waiter id)   ARGV[2] ticket (0 = newcomer)
-- ARGV[3] lease TTL ms   ARGV[4] max queue depth (0 = unbounded)
-- ARGV[5] gate index the waiter is parked on (0 = none)   ARGV[6] "1" = never queue
-- ARGV[7] n (gates)   then per gate i: ARGV[6+2i] cap (0 = uncapped), ARGV[7+2i] wake-up channel
--
-- A lease lives the TTL from its last renewal; a queue entry only two renew
-- periods (2/3 of the TTL), so a replica that stops renewing stops holding
-- waiters behind its own a renew period before it loses its slots.
--
-- A gate lets the request through when its free slots exceed the waiters
-- queued on it with a smaller ticket (for a newcomer: every waiter queued
-- on it), so a newcomer never overtakes an earlier waiter that could use the
-- slot. Returns {status, blocked gate, ticket or waiting count, holders of the
-- blocked gate, queue length of the blocked gate}; status 1 admitted,
-- 0 queued, 2 blocked (try only, nothing queued), -1 queue full.
local member = ARGV[1]
local ticket = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local depth = tonumber(ARGV[4])
local parked = tonumber(ARGV[5])
local try = ARGV[6] == '1'
local n = tonumber(ARGV[7])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + ttl
local qexp = now + math.floor(ttl * 2 / 3)

local function room(i)
  local cap = tonumber(ARGV[6 + 2 * i])
  return cap == 0 or redis.call('ZCARD', KEYS[3 * i]) < cap
end

-- Drop the leases of dead owners and the waiters nobody renews any more;
-- if that made room where waiters queue, wake them.
local function purge(i)
  local h, q, x = KEYS[3 * i], KEYS[3 * i + 1], KEYS[3 * i + 2]
  local gone = redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
  local dead = redis.call('ZRANGEBYSCORE', x, '-inf', now)
  for _, m in ipairs(dead) do
    redis.call('ZREM', q, m)
    redis.call('ZREM', x, m)
  end
  if (gone > 0 or #dead > 0) and redis.call('ZCARD', q) > 0 and room(i) then
    redis.call('PUBLISH', ARGV[7 + 2 * i], gone + #dead)
  end
end

local blocked = 0
for i = 1, n do
  purge(i)
  local cap = tonumber(ARGV[6 + 2 * i])
  if blocked == 0 and cap > 0 then
    local free = cap - redis.call('ZCARD', KEYS[3 * i])
    local ahead
    if ticket > 0 then
      ahead = redis.call('ZCOUNT', KEYS[3 * i + 1], '-inf', '(' .. ARGV[2])
    else
      ahead = redis.call('ZCARD', KEYS[3 * i + 1])
    end
    if ahead >= free then
      blocked = i
    end
  end
end

if blocked == 0 then
  for i = 1, n do
    redis.call('ZADD', KEYS[3 * i], exp, member)
  end
  if parked > 0 then
    redis.call('ZREM', KEYS[3 * parked + 1], member)
    redis.call('ZREM', KEYS[3 * parked + 2], member)
  end
  redis.call('ZREM', KEYS[2], member)
  return {1, 0, ticket, 0, 0}
end

local bh, bq, bx = KEYS[3 * blocked], KEYS[3 * blocked + 1], KEYS[3 * blocked + 2]
local count = redis.call('ZCARD', bh)
if try then
  return {2, blocked, 0, count, redis.call('ZCARD', bq)}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if ticket == 0 then
  local waiting = redis.call('ZCARD', KEYS[2])
  if depth > 0 and waiting >= depth then
    return {-1, blocked, waiting, count, redis.call('ZCARD', bq)}
  end
  -- Tickets start from the clock (ms x 1000), so after Redis loses its data
  -- new waiters still queue behind those that come back with old tickets.
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('SET', KEYS[1], now * 1000)
  end
  ticket = redis.call('INCR', KEYS[1])
end
redis.call('ZADD', KEYS[2], qexp, member)
if parked > 0 and parked ~= blocked then
  redis.call('ZREM', KEYS[3 * parked + 1], member)
  redis.call('ZREM', KEYS[3 * parked + 2], member)
  if redis.call('ZCARD', KEYS[3 * parked + 1]) > 0 and room(parked) then
    redis.call('PUBLISH', ARGV[7 + 2 * parked], 1)
  end
end
redis.call('ZADD', bq, ticket, member)
redis.call('ZADD', bx, qexp, member)
return {0, blocked, ticket, count, redis.call('ZCARD', bq)}
