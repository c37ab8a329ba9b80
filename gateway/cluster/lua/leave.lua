-- leave: a waiter gives up (timeout, cancel, shutdown).
--
-- KEYS[1] holders, KEYS[2] queue, KEYS[3] queue expiries, KEYS[4] fair state
-- of the gate it is parked on; KEYS[5] waiters of its queue gate.
-- ARGV[1] member, ARGV[2] cap of that gate, ARGV[3] its wake-up channel.
-- Waiters behind it counted it as ahead of them; if the gate has room they
-- may go now, so wake them. Its tag is not given back (the key's later
-- waiters keep theirs); a queue it leaves empty drops its fair state.
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
local left = redis.call('ZCARD', KEYS[2])
if left == 0 then
  redis.call('DEL', KEYS[4])
end
local cap = tonumber(ARGV[2])
if left > 0 and (cap == 0 or redis.call('ZCARD', KEYS[1]) < cap) then
  redis.call('PUBLISH', ARGV[3], 1)
end
return 0
