-- admit: the uncontended admission, all or nothing, in as few commands as
-- the ledger allows. It admits only when nobody waits on any gate of the
-- path and every capped gate has a free slot; otherwise it changes nothing
-- and the caller runs acquire.lua, which queues fairly.
--
-- KEYS[1] the 'queued' hash (gate key -> waiters parked there; see fair.lua)
-- ARGV[1] member (lease id)   ARGV[2] lease TTL ms
-- then per gate i: ARGV[1+2i] gate key, ARGV[2+2i] cap (0 = none)
-- A lease is the member in the gate's holders, root .. 'h:' .. gate (member
-- -> expiry ms on Redis's clock); the holders of every gate share KEYS[1]'s
-- "{adm}" hash tag. Leases of dead owners count until a gate looks full.
-- Returns {1, then per gate the holders it found (capped gates; -1 for the
-- others)} admitted, or {0} not (somebody waits, or a gate is full).
local root = string.sub(KEYS[1], 1, -7) -- KEYS[1] is root .. 'queued'
local n = (#ARGV - 2) / 2
local names = {}
for i = 1, n do names[i] = ARGV[1 + 2 * i] end
local waiting = redis.call('HMGET', KEYS[1], unpack(names))
for i = 1, n do
  if waiting[i] then return { 0 } end
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = { 1 }
for i = 1, n do
  local c, held = tonumber(ARGV[2 + 2 * i]), -1
  if c > 0 then
    local h = root .. 'h:' .. names[i]
    held = redis.call('ZCARD', h)
    if held >= c then
      redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
      held = redis.call('ZCARD', h)
      if held >= c then return { 0 } end
    end
  end
  out[1 + i] = held
end
local exp = string.format('%d', now + tonumber(ARGV[2]))
for i = 1, n do
  redis.call('ZADD', root .. 'h:' .. names[i], exp, ARGV[1])
end
return out
