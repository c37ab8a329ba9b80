-- renew: the replica's heartbeat. Registers the replica as live, extends the
-- expiry of every lease and queue entry it owns, and reads the gates it shows.
--
-- KEYS[1] live replicas (member -> expiry ms)
-- KEYS[2 .. m+1] the zsets of the owned entries, paired with ARGV[6 .. m+5]:
--   the first l are leases, renewed for the TTL; the others queue entries,
--   renewed for two renew periods (2/3 of the TTL, as acquire.lua sets them)
-- then for gate j of the g gates to read: holders, queue entries (x:G, every class)
-- ARGV[1] replica id, ARGV[2] TTL ms, ARGV[3] m, ARGV[4] l, ARGV[5] g, then the m members
-- An entry that is gone or expired is not recreated (its slot may have been
-- given to somebody else): its index is reported as lost.
-- Returns {live replicas, {lost indexes}, {holders_1, queue_1, ...}, now ms}
-- (now: Redis's clock, from which the replica learns its offset to it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local exp = now + ttl
local qexp = now + math.floor(ttl * 2 / 3)
local m, l, g = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

redis.call('ZADD', KEYS[1], exp, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local replicas = redis.call('ZCARD', KEYS[1])

local lost = {}
for i = 1, m do
  local k, member = KEYS[1 + i], ARGV[5 + i]
  local score = redis.call('ZSCORE', k, member)
  if score and tonumber(score) > now then
    if i <= l then
      redis.call('ZADD', k, exp, member)
    else
      redis.call('ZADD', k, qexp, member)
    end
  else
    lost[#lost + 1] = i
  end
end

local counts = {}
for j = 1, g do
  counts[2 * j - 1] = redis.call('ZCOUNT', KEYS[1 + m + 2 * j - 1], '(' .. now, '+inf')
  counts[2 * j] = redis.call('ZCARD', KEYS[1 + m + 2 * j])
end
return {replicas, lost, counts, now}
