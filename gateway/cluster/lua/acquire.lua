-- acquire: one admission attempt for a whole path, all or nothing, with the
-- waiters of each gate in fair-tag order (start-time fair queueing).
--
-- KEYS[1]  waiters of the request's queue gate (zset member -> expiry ms)
-- for gate i (1-based), with b = 4(i-1) + 1:
--   KEYS[b+1] holders (member -> lease expiry ms)
--   KEYS[b+2] queue (member -> fair tag)
--   KEYS[b+3] queue expiries (member -> expiry ms)
--   KEYS[b+4] fair state (hash: vt = virtual time, c:<client> = finish tag)
-- ARGV[1] member (lease id, also the waiter id)
-- ARGV[2] the waiter's tag on the gate it is parked on (ignored if none)
-- ARGV[3] lease TTL ms   ARGV[4] max queue depth (0 = unbounded)
-- ARGV[5] gate index the waiter is parked on (0 = none: a newcomer)
-- ARGV[6] "1" = never queue   ARGV[7] client field ('c:' .. client key id)
-- ARGV[8] cost: the tag one admission of the client spans (1e6 / weight)
-- ARGV[9] n (gates), then per gate i: ARGV[8+2i] cap (0 = uncapped),
--         ARGV[9+2i] wake-up channel
--
-- A lease lives the TTL from its last renewal; a queue entry only two renew
-- periods (2/3 of the TTL), so a replica that stops renewing stops holding
-- waiters behind its own a renew period before it loses its slots.
--
-- Fair tags, per gate: a request of client c that queues on a gate (or is
-- admitted through a gate where others queue) gets tag max(vt, fin[c]) and
-- sets fin[c] = tag + cost; admitting a tag moves vt up to it. The queue is
-- ordered by (tag, member). A gate lets the request through when its free
-- slots exceed the waiters ahead of it there: for the waiter parked on it,
-- those before it in the queue; for anyone else, those whose tag is not
-- after the one it would get now. So a newcomer never overtakes a waiter
-- whose fair turn comes first, and a key's waiters keep their order (their
-- tags rise). The fair state is dropped when the gate's queue empties (no
-- backlog, no history) and otherwise lives an hour after its last change.
--
-- Returns {status, blocked gate, tag or waiting count, holders of the
-- blocked gate, queue length of the blocked gate}; status 1 admitted,
-- 0 queued, 2 blocked (try only, nothing queued), -1 queue full.
local member = ARGV[1]
local mytag = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local depth = tonumber(ARGV[4])
local parked = tonumber(ARGV[5])
local try = ARGV[6] == '1'
local client = ARGV[7]
local cost = tonumber(ARGV[8])
local n = tonumber(ARGV[9])
local fairTTL = 3600000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + ttl
local qexp = now + math.floor(ttl * 2 / 3)

local function key(i, j) return KEYS[4 * (i - 1) + 1 + j] end
local function cap(i) return tonumber(ARGV[8 + 2 * i]) end
local function channel(i) return ARGV[9 + 2 * i] end
-- Scores and tags as integers: Lua's own number format keeps 14 digits.
local function fmt(x) return string.format('%.0f', x) end

local function room(i)
  local c = cap(i)
  return c == 0 or redis.call('ZCARD', key(i, 1)) < c
end

-- A gate nobody queues on keeps no fair state.
local function tidy(i)
  if redis.call('ZCARD', key(i, 2)) == 0 then
    redis.call('DEL', key(i, 4))
  end
end

-- The tag the client would get on gate i now.
local function nextTag(i)
  local f = redis.call('HMGET', key(i, 4), 'vt', client)
  return math.max(tonumber(f[1] or '0') or 0, tonumber(f[2] or '0') or 0)
end

-- Give the client tag on gate i: its finish moves past it, and vt up to it
-- when admitted.
local function charge(i, tag, admitted)
  local f = key(i, 4)
  redis.call('HSET', f, client, fmt(tag + cost))
  if admitted then
    local vt = tonumber(redis.call('HGET', f, 'vt') or '0') or 0
    if tag > vt then
      redis.call('HSET', f, 'vt', fmt(tag))
    end
  end
  redis.call('PEXPIRE', f, fairTTL)
end

-- Drop the leases of dead owners and the waiters nobody renews any more;
-- if that made room where waiters queue, wake them.
local function purge(i)
  local h, q, x = key(i, 1), key(i, 2), key(i, 3)
  local gone = redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
  local dead = redis.call('ZRANGEBYSCORE', x, '-inf', now)
  for _, m in ipairs(dead) do
    redis.call('ZREM', q, m)
    redis.call('ZREM', x, m)
  end
  if #dead > 0 then
    tidy(i)
  end
  if (gone > 0 or #dead > 0) and redis.call('ZCARD', q) > 0 and room(i) then
    redis.call('PUBLISH', channel(i), gone + #dead)
  end
end

-- A retry of an attempt that was admitted (its reply was lost) finds its
-- own leases: it is admitted, not queued behind itself.
if n > 0 and redis.call('ZSCORE', key(1, 1), member) then
  for i = 1, n do
    redis.call('ZADD', key(i, 1), exp, member)
  end
  if parked > 0 then
    redis.call('ZREM', key(parked, 2), member)
    redis.call('ZREM', key(parked, 3), member)
    tidy(parked)
  end
  redis.call('ZREM', KEYS[1], member)
  return {1, 0, 0, 0, 0}
end

local blocked = 0
local present = false -- the waiter's entry is still in its parked gate's queue
local tags = {} -- gate -> the tag the request would get there (queue not empty)
for i = 1, n do
  purge(i)
  local c = cap(i)
  if blocked == 0 and c > 0 then
    local free = c - redis.call('ZCARD', key(i, 1))
    local ahead = false
    if i == parked then
      ahead = redis.call('ZRANK', key(i, 2), member)
      present = ahead ~= false
    end
    if ahead == false then
      ahead = 0
      if redis.call('ZCARD', key(i, 2)) > 0 then
        tags[i] = nextTag(i)
        ahead = redis.call('ZCOUNT', key(i, 2), '-inf', fmt(tags[i]))
      end
    end
    if ahead >= free then
      blocked = i
    end
  end
end

if blocked == 0 then
  for i = 1, n do
    redis.call('ZADD', key(i, 1), exp, member)
    if tags[i] then
      charge(i, tags[i], true)
    end
  end
  if parked > 0 then
    redis.call('ZREM', key(parked, 2), member)
    redis.call('ZREM', key(parked, 3), member)
    if present then
      -- Its tag was charged when it queued; admitting it moves vt.
      local f = key(parked, 4)
      local vt = tonumber(redis.call('HGET', f, 'vt') or '0') or 0
      if mytag > vt then
        redis.call('HSET', f, 'vt', fmt(mytag))
      end
    end
    tidy(parked)
  end
  redis.call('ZREM', KEYS[1], member)
  return {1, 0, 0, 0, 0}
end

local bh, bq, bx = key(blocked, 1), key(blocked, 2), key(blocked, 3)
local count = redis.call('ZCARD', bh)
if try then
  return {2, blocked, 0, count, redis.call('ZCARD', bq)}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if parked == 0 then
  local waiting = redis.call('ZCARD', KEYS[1])
  if depth > 0 and waiting >= depth then
    return {-1, blocked, waiting, count, redis.call('ZCARD', bq)}
  end
end
redis.call('ZADD', KEYS[1], qexp, member)
local tag = mytag
if blocked ~= parked or not present then
  -- Queued here afresh (a newcomer, a move, or an entry that lapsed): the
  -- tag it gets now, as if it arrived now.
  tag = tags[blocked] or nextTag(blocked)
  charge(blocked, tag, false)
end
if parked > 0 and parked ~= blocked then
  redis.call('ZREM', key(parked, 2), member)
  redis.call('ZREM', key(parked, 3), member)
  tidy(parked)
  if redis.call('ZCARD', key(parked, 2)) > 0 and room(parked) then
    redis.call('PUBLISH', channel(parked), 1)
  end
end
redis.call('ZADD', bq, fmt(tag), member)
redis.call('ZADD', bx, qexp, member)
return {0, blocked, tag, count, redis.call('ZCARD', bq)}
