-- rejoin: a replica back on Redis after running its fail mode puts the
-- ledger straight, in one step, before it admits anything through Redis
-- (fair.lua comes first).
--
-- KEYS[1] the 'queued' hash
-- ARGV[1] TTL ms, ARGV[2] o (queue entries to remove), ARGV[3] a (leases to add)
-- for entry i (1-based) of the o: KEYS[1+i] waiters of its queue gate;
--   ARGV[4i] member, ARGV[4i+1] its queue entry, ARGV[4i+2] the key of the
--   gate it was parked on, ARGV[4i+3] that gate's cap
-- for lease j of the a: ARGV[2+4o+2j] member, ARGV[3+4o+2j] gate key
--
-- Leases: the permits its fallback admitted that still run, one per gate of
-- their path. They are added whatever the cap (they run already), so a gate
-- they fill admits nobody else until enough of them end.
-- Queue entries: the waiters it dropped locally when Redis went away (they
-- moved to the fallback or failed). They leave as leave.lua has them leave.
-- Returns the number of leases added.
local F = fair()
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local exp = now + tonumber(ARGV[1])
local o, a = tonumber(ARGV[2]), tonumber(ARGV[3])

local added = 0
for j = 1, a do
  added = added + redis.call('ZADD', F.root .. 'h:' .. ARGV[3 + 4 * o + 2 * j], exp, ARGV[2 + 4 * o + 2 * j])
end

for i = 1, o do
  local member, entry, g, cap = ARGV[4 * i], ARGV[4 * i + 1], ARGV[4 * i + 2], tonumber(ARGV[4 * i + 3])
  redis.call('ZREM', KEYS[1 + i], member)
  local left = F.leave(g, entry)
  if left and left > 0 then
    local h = F.root .. 'h:' .. g
    redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
    if cap == 0 or redis.call('ZCARD', h) < cap then
      F.wake(g)
    end
  end
end
return added
