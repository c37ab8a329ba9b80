-- wake: publish the waiter first in line on each gate named, for a release
-- that freed a slot there while somebody waited (fair.lua comes first).
-- The release itself is a MULTI/EXEC of ZREMs and an HMGET of 'queued'
-- (permit.go); this script runs only when that HMGET found waiters.
--
-- KEYS[1] the 'queued' hash; ARGV the gate keys
for i = 1, #ARGV do
  fair().wake(ARGV[i])
end
return #ARGV
