-- rejoin: a replica back on Redis after running its fail mode puts the
-- ledger straight, in one step, before it admits anything through Redis.
--
-- ARGV[1] TTL ms, ARGV[2] o (queue entries to remove), ARGV[3] a (leases to add)
-- for entry i (1-based) of the o: KEYS[5i-4] holders, KEYS[5i-3] queue,
--   KEYS[5i-2] queue expiries, KEYS[5i-1] fair state of the gate it was
--   parked on, KEYS[5i] waiters of its queue gate; ARGV[3i+1] member,
--   ARGV[3i+2] cap of that gate, ARGV[3i+3] its wake-up channel
-- for lease j of the a: KEYS[5o+j] holders of a gate, ARGV[3+3o+j] member
--
-- Leases: the permits its fallback admitted that still run, one per gate of
-- their path. They are added whatever the cap (they run already), so a gate
-- they fill admits nobody else until enough of them end.
-- Queue entries: the waiters it dropped locally when Redis went away (they
-- moved to the fallback or failed). They are removed as leave.lua does, and
-- the gate is woken if that leaves room for the waiters behind them (and
-- its fair state dropped if that empties its queue).
-- Returns the number of leases added.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now + tonumber(ARGV[1])
local o, a = tonumber(ARGV[2]), tonumber(ARGV[3])

local added = 0
for j = 1, a do
  added = added + redis.call('ZADD', KEYS[5 * o + j], exp, ARGV[3 + 3 * o + j])
end

for i = 1, o do
  local h, q, x, f, w = KEYS[5 * i - 4], KEYS[5 * i - 3], KEYS[5 * i - 2], KEYS[5 * i - 1], KEYS[5 * i]
  local member, cap = ARGV[3 * i + 1], tonumber(ARGV[3 * i + 2])
  local was = redis.call('ZREM', q, member)
  redis.call('ZREM', x, member)
  redis.call('ZREM', w, member)
  if redis.call('ZCARD', q) == 0 then
    redis.call('DEL', f)
  elseif was == 1 then
    redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
    if cap == 0 or redis.call('ZCARD', h) < cap then
      redis.call('PUBLISH', ARGV[3 * i + 3], 1)
    end
  end
end
return added
