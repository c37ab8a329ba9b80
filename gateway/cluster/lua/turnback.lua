-- turnback: give back a dispatch turn that turn.lua reserved and that was
-- not used (no dispatch followed), while no later turn was reserved after
-- it: the next free time is still the one that reservation set (ARGV[1]).
-- It then moves back to the turn's start, so the turn is never granted
-- twice, as the in-process spacing does (gateway/ratelimit spacing.go).
--
-- KEYS[1] the turn key (next free dispatch time, µs)
-- ARGV[1] the token: the next free time the reservation set (µs)
-- ARGV[2] spacing (µs)
-- Returns 1 given back, 0 not (a later turn was reserved, or it lapsed).
local cur = redis.call('GET', KEYS[1])
local token = tonumber(ARGV[1])
if not cur or tonumber(cur) ~= token then
  return 0
end
local at = token - tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if at <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.0f', at), 'PX', math.ceil((at - now) / 1000) + 1000)
end
return 1
