-- turn: reserve a connection's next dispatch turn (rpm/minTime spacing),
-- on Redis's clock, in microseconds.
--
-- KEYS[1] the connection's turn key (next free dispatch time, µs)
-- ARGV[1] spacing (µs), ARGV[2] budget (µs; negative: none)
-- Returns {reserved (1/0), wait until the turn (µs), the next free time it
-- set (µs; 0 when not reserved: the token turnback.lua takes)}. A turn more
-- than the budget away is not reserved.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local spacing = tonumber(ARGV[1])
local budget = tonumber(ARGV[2])
local at = math.max(now, tonumber(redis.call('GET', KEYS[1]) or '0'))
local wait = at - now
if budget >= 0 and wait > budget then
  return {0, wait, 0}
end
local nxt = at + spacing
redis.call('SET', KEYS[1], string.format('%.0f', nxt), 'PX', math.ceil((nxt - now) / 1000) + 1000)
return {1, wait, nxt}
