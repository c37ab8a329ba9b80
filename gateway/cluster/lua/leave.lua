-- leave: a waiter gives up (timeout, cancel, shutdown); fair.lua comes first.
--
-- KEYS[1] the 'queued' hash, KEYS[2] waiters of its queue gate
-- ARGV[1] member, ARGV[2] its queue entry, ARGV[3] the key of the gate it is
-- parked on, ARGV[4] that gate's cap
-- It gives its key's turn back (unqueue): the key's next waiter has it, or
-- the key's next request if none is left. Waiters behind it counted it as
-- ahead of them; if the gate has room the first in line may go now.
local F = fair()
redis.call('ZREM', KEYS[2], ARGV[1])
local g, cap = ARGV[3], tonumber(ARGV[4])
local left = F.leave(g, ARGV[2])
if left and left > 0
    and (cap == 0 or redis.call('ZCARD', F.root .. 'h:' .. g) < cap) then
  F.wake(g)
end
return 0
