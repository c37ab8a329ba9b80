-- release: give back a permit's leases and wake the first in line on each
-- gate where others wait (fair.lua comes first).
--
-- KEYS[1] the 'queued' hash
-- ARGV[1] member, ARGV[1+i] gate key of gate i (its holders: root .. 'h:' .. gate)
-- Uncontended (nobody waits on the path: one HMGET) it is one ZREM a gate.
-- Returns how many leases were still there (fewer than the gates means some
-- had expired: the owner stopped renewing for longer than the TTL).
local root = string.sub(KEYS[1], 1, -7)
local waiting = redis.call('HMGET', KEYS[1], unpack(ARGV, 2))
local released = 0
for i = 2, #ARGV do
  if redis.call('ZREM', root .. 'h:' .. ARGV[i], ARGV[1]) == 1 then
    released = released + 1
    if waiting[i - 1] then
      fair().wake(ARGV[i])
    end
  end
end
return released
