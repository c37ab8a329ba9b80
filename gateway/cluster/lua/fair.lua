-- fair: the queue of a gate, in start-time fair order, as the in-process
-- controller keeps it (docs/ADMISSION.md, "Fair share"). Not a script of its
-- own: scripts.go puts it in front of every script that may touch a queue,
-- and fair() builds its functions on first use, so a script that finds
-- nobody waiting does not pay for them. Every such script has KEYS[1] = the
-- 'queued' hash, and the keys of a gate G are named from it (all share
-- KEYS[1]'s "{adm}" hash tag, so they are in its Redis Cluster slot):
--
--   queued   hash: G -> waiters parked on G (no field: nobody), so the
--            uncontended path learns with one HMGET that nobody waits
--   q:G      the waiters parked on G, every score 0, ordered by their entry
--            "<client>\1<arrival µs, 16 digits>\1<waiter id>": by client key,
--            then arrival (so ZLEXCOUNT counts a key's waiters before one)
--   x:G      those entries' expiries (entry -> ms); renew.lua extends them
--   t:G      one turn per key waiting on G: member "<L, 16 digits>\1<client>"
--            (L = 1e6 / weight: the span of one turn), score S, the start
--            tag of the key's next turn; ordered by (S, L, client) — the
--            turn that starts first, then the heavier key, then the id
--   f:G      hash: vt = virtual time; l<client> = the key's member in t:G;
--            k<client> = where the key's next turn starts (kept when its
--            last waiter left, or charged when it went past the queue)
--   free:G   wake-up channel; a message names the waiter first in line
--
-- A key's waiters share its one turn: the first of them has the turn S,
-- the p-th the turn S + p·L. Admitting one of them moves vt up to S and S
-- on by L; a waiter that leaves (timeout, cancel, move, lapse) takes nothing
-- with it — the key's next waiter has the turn — and when the key's last
-- waiter leaves, its turn's start is kept for its next request, under
-- max(vt, ·). Every tag is an integer, exact in Redis's double scores.
local lib -- fair()'s functions, once built

local function fair()
  if lib then return lib end
  local root = string.sub(KEYS[1], 1, -7) -- KEYS[1] is root .. 'queued'
  local SEP = '\1'

  local function gk(kind, gate) return root .. kind .. ':' .. gate end
  local function fmt(x) return string.format('%.0f', x) end
  -- A missing hash field reads as false in Lua; it counts as 0.
  local function num(v) return tonumber(v or '0') or 0 end

  local function entryOf(cf, arrival, member)
    return cf .. SEP .. string.format('%016.0f', arrival) .. SEP .. member
  end
  local function entryClient(e) return string.sub(e, 1, string.find(e, SEP, 1, true) - 1) end
  local function entryMember(e)
    local a = string.find(e, SEP, 1, true)
    return string.sub(e, string.find(e, SEP, a + 1, true) + 1)
  end
  -- Bytewise, as Redis orders the members of a sorted set (Lua's < follows
  -- the server's locale).
  local function less(a, b)
    for i = 1, math.min(#a, #b) do
      local x, y = string.byte(a, i), string.byte(b, i)
      if x ~= y then return x < y end
    end
    return #a < #b
  end
  local function turnOf(cost, cf) return string.format('%016.0f', cost) .. SEP .. cf end
  local function turnCost(tm) return tonumber(string.sub(tm, 1, 16)) end
  local function turnClient(tm) return string.sub(tm, 18) end

  -- The waiters of key cf on gate.
  local function keyWaiting(gate, cf)
    return redis.call('ZLEXCOUNT', gk('q', gate), '[' .. cf .. SEP, '(' .. cf .. '\2')
  end

  -- After a change of gate's queue: its count in 'queued', or, once nobody
  -- waits, no fair state at all (no backlog, no history). Returns the count.
  local function sync(gate)
    local n = redis.call('ZCARD', gk('q', gate))
    if n == 0 then
      redis.call('DEL', gk('t', gate), gk('x', gate), gk('f', gate))
      redis.call('HDEL', KEYS[1], gate)
    else
      redis.call('HSET', KEYS[1], gate, n)
    end
    return n
  end

  -- Where the request of key cf (turn span cost, entry e) stands on gate:
  -- how many turns come before its own (counted up to limit), its turn T, its
  -- key's member in t:G (false: the key has no turn there) and that turn's
  -- start. A key's waiters before e hold its earlier turns; another key j
  -- with waiters has turns S_j, S_j + L_j, … for as many of them as wait.
  local function position(gate, cf, cost, e, limit)
    local t, f = gk('t', gate), gk('f', gate)
    local tm = redis.call('HGET', f, 'l' .. cf)
    local mine, s, T, ahead
    if tm then
      mine = tm
      s = tonumber(redis.call('ZSCORE', t, tm))
      ahead = redis.call('ZLEXCOUNT', gk('q', gate), '[' .. cf .. SEP, '(' .. e)
      T = s + ahead * turnCost(tm)
    else
      -- A key with no waiters here starts at vt, or where its last turn
      -- here ended if that is later (no credit for idling, no loss either).
      mine = turnOf(cost, cf)
      local h = redis.call('HMGET', f, 'vt', 'k' .. cf)
      T = math.max(num(h[1]), num(h[2]))
      ahead = 0
    end
    local off, page = 0, limit + 2
    while ahead < limit do
      local r = redis.call('ZRANGEBYSCORE', t, '-inf', fmt(T), 'WITHSCORES', 'LIMIT', off, page)
      for i = 1, #r, 2 do
        local j = r[i]
        if j ~= mine then
          local lj, d = turnCost(j), T - tonumber(r[i + 1])
          local c = math.ceil(d / lj) -- j's turns that start before T
          if d % lj == 0 and less(j, mine) then
            c = c + 1 -- and the one that starts at T, ordered before ours
          end
          if c > 0 then
            ahead = ahead + math.min(c, keyWaiting(gate, turnClient(j)))
            if ahead >= limit then break end
          end
        end
      end
      if #r < 2 * page then break end
      off = off + page
    end
    return ahead, T, tm, s
  end

  -- The request of key cf took a turn on gate (admitted through it while
  -- others wait), as position found it: vt moves up to the turn's start and
  -- the key's next turn starts where this one ends.
  local function takeTurn(gate, cf, cost, T, tm, s)
    local f = gk('f', gate)
    local vt = num(redis.call('HGET', f, 'vt'))
    if tm then
      if s > vt then redis.call('HSET', f, 'vt', fmt(s)) end
      redis.call('ZADD', gk('t', gate), fmt(s + turnCost(tm)), tm)
    else
      if T > vt then redis.call('HSET', f, 'vt', fmt(T)) end
      redis.call('HSET', f, 'k' .. cf, fmt(T + cost))
    end
  end

  -- Park entry e of key cf on gate (idempotent): a key without waiters there
  -- gets its turn, starting at max(vt, where its last one ended). Returns the
  -- queue length.
  local function enqueue(gate, cf, cost, e, qexp)
    local f = gk('f', gate)
    if not redis.call('HGET', f, 'l' .. cf) then
      local h = redis.call('HMGET', f, 'vt', 'k' .. cf)
      local tm = turnOf(cost, cf)
      redis.call('ZADD', gk('t', gate), fmt(math.max(num(h[1]), num(h[2]))), tm)
      redis.call('HSET', f, 'l' .. cf, tm)
      redis.call('HDEL', f, 'k' .. cf)
    end
    redis.call('ZADD', gk('q', gate), 0, e)
    redis.call('ZADD', gk('x', gate), qexp, e)
    return sync(gate)
  end

  -- Take entry e off gate's queue; reports whether it was there. The waiter
  -- gives its key's turn back: the key's next waiter has it, and a key left
  -- with none keeps its start for its next request. The caller syncs.
  local function unqueue(gate, e)
    if redis.call('ZREM', gk('q', gate), e) == 0 then
      return false
    end
    redis.call('ZREM', gk('x', gate), e)
    local cf = entryClient(e)
    if keyWaiting(gate, cf) == 0 then
      local f, t = gk('f', gate), gk('t', gate)
      local tm = redis.call('HGET', f, 'l' .. cf)
      if tm then
        local s = redis.call('ZSCORE', t, tm)
        redis.call('ZREM', t, tm)
        redis.call('HDEL', f, 'l' .. cf)
        if s then redis.call('HSET', f, 'k' .. cf, s) end
      end
    end
    return true
  end

  -- Wake the waiter first in line on gate (the earliest waiter of the key
  -- whose turn comes first), on whichever replica it waits; an empty message
  -- if the state is inconsistent, so every replica re-checks its own.
  local function wake(gate)
    local first = ''
    local t = redis.call('ZRANGE', gk('t', gate), 0, 0)
    if #t > 0 then
      local cf = turnClient(t[1])
      local e = redis.call('ZRANGEBYLEX', gk('q', gate), '[' .. cf .. SEP, '(' .. cf .. '\2', 'LIMIT', 0, 1)
      if #e > 0 then first = entryMember(e[1]) end
    end
    redis.call('PUBLISH', gk('free', gate), first)
  end

  -- Drop gate's queue entries that nobody renews any more (their replica is
  -- gone), as leaves. Returns the queue length after, or false if none lapsed.
  local function purgeLapsed(gate, now)
    local dead = redis.call('ZRANGEBYSCORE', gk('x', gate), '-inf', now)
    if #dead == 0 then return false end
    for _, e in ipairs(dead) do
      unqueue(gate, e)
    end
    return sync(gate)
  end

  lib = {
    root = root, fmt = fmt, num = num, entryOf = entryOf, sync = sync, position = position,
    takeTurn = takeTurn, enqueue = enqueue, unqueue = unqueue, wake = wake, purgeLapsed = purgeLapsed,
  }
  return lib
end
