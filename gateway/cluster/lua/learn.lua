-- learn: move one gate's learned (adaptive) cap, shared by every replica.
--
-- KEYS[1] the connection's learned caps hash: <gate key> = cap
-- ARGV[1] gate key, ARGV[2] from, ARGV[3] to, ARGV[4] ttl (ms)
-- The cap moves to ARGV[3] when it is still ARGV[2] or not there yet; else
-- it stays what another replica set. The hash lives ttl after its last
-- change. Returns the cap after.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and tonumber(cur) ~= tonumber(ARGV[2]) then
  return tonumber(cur)
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return tonumber(ARGV[3])
