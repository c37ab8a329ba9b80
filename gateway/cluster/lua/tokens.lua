-- tokens: charge tokens to a connection's (or key's) tpm window, on Redis's
-- clock; or, with ARGV[3] = 1, reserve them only when they fit.
--
-- KEYS[1] the connection's tpm hash: m = start of the window (ms), u = used
-- ARGV[1] the tpm limit, ARGV[2] tokens to add (negative: a reservation
-- settled below its estimate gives the difference back), ARGV[3] 1 = reserve
-- A new minute pays off tpm tokens of debt per minute passed, as in-process.
-- A reservation fits an empty window whatever its size (so a request larger
-- than the whole minute can still go, and leaves debt), else only within tpm.
-- Returns {1 if charged else 0, tokens used in the window after, ms left in it}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local minute = now - now % 60000
local tpm = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local m = tonumber(redis.call('HGET', KEYS[1], 'm') or '0')
local used = tonumber(redis.call('HGET', KEYS[1], 'u') or '0')
if m < minute then
  if m > 0 and tpm > 0 then
    used = math.max(used - math.min((minute - m) / 60000, 1048576) * tpm, 0)
  else
    used = 0
  end
end
if ARGV[3] == '1' and used > 0 and (used >= tpm or used + n > tpm) then
  return {0, used, minute + 60000 - now}
end
used = math.max(used + n, 0)
redis.call('HSET', KEYS[1], 'm', string.format('%.0f', minute), 'u', string.format('%.0f', used))
-- Kept while the debt lasts, plus the window itself.
local minutes = 2
if tpm > 0 then minutes = math.min(math.ceil(used / tpm), 1440) + 2 end
redis.call('PEXPIRE', KEYS[1], minute + minutes * 60000 - now)
return {1, used, minute + 60000 - now}
