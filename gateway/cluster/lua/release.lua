-- release: give back a permit's leases and wake the waiters of each gate.
--
-- for gate i (1-based): KEYS[2i-1] holders, KEYS[2i] queue
-- ARGV[1] member, then per gate i: ARGV[1+i] wake-up channel
-- Returns how many leases were still there (fewer than the gates means some
-- had expired: the owner stopped renewing for longer than the TTL).
local released = 0
for i = 1, #ARGV - 1 do
  if redis.call('ZREM', KEYS[2 * i - 1], ARGV[1]) == 1 then
    released = released + 1
    if redis.call('ZCARD', KEYS[2 * i]) > 0 then
      redis.call('PUBLISH', ARGV[1 + i], 1)
    end
  end
end
return released
