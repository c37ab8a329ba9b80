-- acquire: one admission attempt for a whole path, all or nothing, with the
-- waiters of each gate in fair order (fair.lua, which comes first). A
-- newcomer tries admit.lua first; this runs when somebody waits on its path
-- or a gate is full, and for every re-check of a waiter.
--
-- KEYS[1] the 'queued' hash   KEYS[2] waiters of the request's queue gate
--         (member -> expiry ms, for the queue depth)
-- Gate i's holders are root .. 'h:' .. its key (member -> lease expiry ms).
-- ARGV[1] member (lease id, also the waiter id)
-- ARGV[2] gate index the waiter is parked on (0 = none: a newcomer)
-- ARGV[3] "1" = never queue   ARGV[4] client field ('c:' .. client key id)
-- ARGV[5] cost: the span of one turn of the client (1e6 / weight)
-- ARGV[6] lease TTL ms   ARGV[7] max queue depth (0 = unbounded)
-- ARGV[8] the waiter's arrival (µs on Redis's clock; 0 = not queued yet)
-- ARGV[9] its class's level (0 interactive, 1 standard, 2 batch)
-- ARGV[10] the aging period (ms): a waiter moves up one level per period
-- ARGV[11] n, then per gate i: ARGV[10+2i] gate key, ARGV[11+2i] cap (0 = none)
--
-- A lease lives the TTL from its last renewal; a queue entry only two renew
-- periods (2/3 of the TTL), so a replica that stops renewing stops holding
-- waiters behind its own a renew period before it loses its slots.
--
-- A capped gate lets the request through when its free slots exceed the
-- turns before the request's there (fair.lua's position): so a newcomer
-- never overtakes a waiter whose fair turn comes first, and a key's waiters
-- keep their arrival order; waiters of a higher level (its class, raised
-- by aging: fair.lua) all come first. Nobody waiting on any gate of the path (one
-- HMGET says so) is the uncontended case: a count of each capped gate's
-- holders, a lease in each gate, and no fair state at all (as admit.lua
-- does). Leases of dead owners are dropped when a gate looks full.
--
-- Returns {status, blocked gate, arrival or waiting count, holders of the
-- blocked gate, queue length of the blocked gate} and, when admitted, per
-- gate the holders it found (capped gates; -1 for the others); status 1 admitted,
-- 0 queued (with its arrival), 2 blocked (try only, nothing queued),
-- -1 queue full (with the waiters counted against the depth).
local member = ARGV[1]
local parked = tonumber(ARGV[2])
local try = ARGV[3] == '1'
local cf = ARGV[4]
local cost = tonumber(ARGV[5])
local ttl = tonumber(ARGV[6])
local depth = tonumber(ARGV[7])
local arrival = tonumber(ARGV[8])
local base = tonumber(ARGV[9])
local aging = tonumber(ARGV[10])
local n = tonumber(ARGV[11])
local F = fair()
local clock = F.time()
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local exp = now + ttl
local qexp = now + math.floor(ttl * 2 / 3)
if arrival == 0 then
  arrival = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
end
local e = F.entryOf(cf, arrival, member)

local function gate(i) return ARGV[10 + 2 * i] end
local function cap(i) return tonumber(ARGV[11 + 2 * i]) end
local function holders(i) return F.root .. 'h:' .. gate(i) end
local function room(i)
  local c = cap(i)
  return c == 0 or redis.call('ZCARD', holders(i)) < c
end

-- Who waits on the gates of the path, in one read.
local names = {}
for i = 1, n do names[i] = gate(i) end
local waiting = redis.call('HMGET', KEYS[1], unpack(names))

local blocked = 0
local held = 0
local found = { 1, 0, 0, 0, 0 } -- the admitted reply: holders found on each gate
local turns = {} -- gate i -> the request's place there, where others wait
for i = 1, n do
  local c = cap(i)
  if c > 0 then
    local h = holders(i)
    held = redis.call('ZCARD', h)
    if held >= c then
      redis.call('ZREMRANGEBYSCORE', h, '-inf', now)
      held = redis.call('ZCARD', h)
    end
    found[5 + i] = held
    local free = c - held
    if free > 0 and waiting[i] then
      local left = F.purgeLapsed(gate(i), now)
      if left then
        waiting[i] = left > 0 and left
        if left > 0 then F.wake(gate(i)) end
      end
    end
    if free <= 0 then
      blocked = i
      break
    end
    if waiting[i] then
      F.promote(gate(i))
      local lv = (parked == i and F.levelOf(gate(i), e)) or F.levelAt(base, arrival, aging)
      local ahead, T, tm, s = F.position(gate(i), lv, cf, cost, e, free)
      if ahead >= free then
        blocked = i
        break
      end
      turns[i] = { lv, T, tm, s }
    end
  end
end

-- A retry of an attempt that was admitted (its reply was lost) holds its
-- leases already: it is admitted, not queued behind itself.
if blocked > 0 and redis.call('ZSCORE', holders(1), member) then
  blocked = 0
  turns = {}
end

if blocked == 0 then
  for i = 1, n do
    redis.call('ZADD', holders(i), exp, member)
    local p = turns[i]
    if p then F.takeTurn(gate(i), p[1], cf, cost, p[2], p[3], p[4]) end
  end
  if parked > 0 then
    local left = F.leave(gate(parked), e)
    if left and left > 0 and room(parked) then
      F.wake(gate(parked)) -- room for the next in line too
    end
    redis.call('ZREM', KEYS[2], member)
  end
  for i = 1, n do
    found[5 + i] = found[5 + i] or -1
  end
  return found
end

local bg = gate(blocked)
if try then
  return { 2, blocked, 0, held, F.num(waiting[blocked]) }
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if parked == 0 then
  local w = redis.call('ZCARD', KEYS[2])
  if depth > 0 and w >= depth then
    return { -1, blocked, w, held, F.num(waiting[blocked]) }
  end
end
redis.call('ZADD', KEYS[2], qexp, member)
-- Parked (again) on the blocking gate: a newcomer, a waiter blocked by
-- another gate than its own (it moves, keeping its arrival), or one whose
-- entry lapsed; a waiter still parked there stays as it is.
local queued = F.enqueue(bg, base, aging, cf, cost, e, arrival, qexp, parked == blocked)
if parked > 0 and parked ~= blocked then
  local left = F.leave(gate(parked), e)
  if left and left > 0 and room(parked) then
    F.wake(gate(parked))
  end
end
return { 0, blocked, arrival, held, queued }
