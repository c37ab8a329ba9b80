-- tokens: charge tokens to a connection's tpm window, on Redis's clock.
--
-- KEYS[1] the connection's tpm hash: m = start of the window (ms), u = used
-- ARGV[1] the tpm limit, ARGV[2] tokens to add
-- A new minute pays off tpm tokens of debt per minute passed, as in-process.
-- Returns the tokens used in the window after the charge.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local minute = now - now % 60000
local tpm = tonumber(ARGV[1])
local m = tonumber(redis.call('HGET', KEYS[1], 'm') or '0')
local used = tonumber(redis.call('HGET', KEYS[1], 'u') or '0')
if m < minute then
  if m > 0 and tpm > 0 then
    used = math.max(used - math.min((minute - m) / 60000, 1048576) * tpm, 0)
  else
    used = 0
  end
end
used = used + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'm', string.format('%.0f', minute), 'u', string.format('%.0f', used))
-- Kept while the debt lasts, plus the window itself.
local minutes = 2
if tpm > 0 then minutes = math.min(math.ceil(used / tpm), 1440) + 2 end
redis.call('PEXPIRE', KEYS[1], minute + minutes * 60000 - now)
return used
