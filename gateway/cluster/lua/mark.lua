-- mark: put a cooldown or suspension in a connection's health hash, on
-- Redis's clock, never shortening one already there.
--
-- KEYS[1] the connection's health hash (see peek.lua)
-- ARGV[1] field (s, c, or m:<model>), ARGV[2] duration (ms)
-- Expired fields are dropped, and the hash expires with its last entry.
-- Returns the ms left of the field's entry.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local untl = now + tonumber(ARGV[2])
local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if untl > cur then
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', untl))
else
  untl = cur
end
local last = 0
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  local u = tonumber(h[i + 1])
  if u <= now then
    redis.call('HDEL', KEYS[1], h[i])
  elseif u > last then
    last = u
  end
end
if last > now then
  redis.call('PEXPIRE', KEYS[1], last - now)
end
return untl - now
