-- peek: a connection's shared state, read only, on Redis's clock.
--
-- KEYS[1] the connection's health hash: s = suspended until (ms),
--         c = every model cooling until (ms), m:<model> = model cooling until (ms)
-- KEYS[2] the connection's tpm hash (see tokens.lua)
-- KEYS[3] the connection's learned caps hash (see learn.lua)
-- ARGV[1] the tpm limit
-- Returns {tpm used, ms left in the window, then field, ms left, ...} for
-- the health entries still in force, then 'l:' .. gate key, cap for every
-- learned cap.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local minute = now - now % 60000
local tpm = tonumber(ARGV[1])
local used = 0
local m = tonumber(redis.call('HGET', KEYS[2], 'm') or '0')
if m > 0 then
  used = tonumber(redis.call('HGET', KEYS[2], 'u') or '0')
  if m < minute then
    if tpm > 0 then
      used = math.max(used - math.min((minute - m) / 60000, 1048576) * tpm, 0)
    else
      used = 0
    end
  end
end
local out = {used, minute + 60000 - now}
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  local left = tonumber(h[i + 1]) - now
  if left > 0 then
    out[#out + 1] = h[i]
    out[#out + 1] = left
  end
end
local l = redis.call('HGETALL', KEYS[3])
for i = 1, #l, 2 do
  out[#out + 1] = 'l:' .. l[i]
  out[#out + 1] = tonumber(l[i + 1])
end
return out
