-- fair: the queue of a gate, in start-time fair order, as the in-process
-- controller keeps it (docs/ADMISSION.md, "Fair share"). Not a script of its
-- own: scripts.go puts it in front of every script that may touch a queue,
-- and fair() builds its functions on first use, so a script that finds
-- nobody waiting does not pay for them. Every such script has KEYS[1] = the
-- 'queued' hash, and the keys of a gate G are named from it (all share
-- KEYS[1]'s "{adm}" hash tag, so they are in its Redis Cluster slot):
--
--   queued   hash: G -> waiters parked on G, every class (no field:
--            nobody), so the uncontended path learns with one HMGET that
--            nobody waits
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
-- Priority classes (docs/ADMISSION.md, "Priority classes"): q, t and f are
-- per class level — level 1 (standard) is q:G, t:G, f:G as above, level 0
-- (interactive) qi:G, ti:G, fi:G, level 2 (batch) qb:G, tb:G, fb:G — each
-- its own fair queue; x:G holds every level's entries. A gate serves its
-- highest non-empty level first. Aging: an entry parked below level 0 has
-- one member per level it will reach in
--   a:G      "<level>\1<entry>" -> when it reaches that level (ms): its
--            arrival + (its class's level - level) × the aging period
-- and promote() moves the entries whose time has come up, as newcomers to
-- their new level's fair queue, before a gate's order is looked at (no
-- timer: the order matters only then).
--
local lib -- fair()'s functions, once built

local function fair()
  if lib then return lib end
  local root = string.sub(KEYS[1], 1, -7) -- KEYS[1] is root .. 'queued'
  local SEP = '\1'

  local function gk(kind, gate) return root .. kind .. ':' .. gate end
  -- The per-level keys: level 1 (standard) keeps the plain names.
  local SUF = { [0] = 'i', [1] = '', [2] = 'b' }
  local function lk(kind, lv, gate) return root .. kind .. SUF[lv] .. ':' .. gate end
  local function fmt(x) return string.format('%.0f', x) end
  -- A missing hash field reads as false in Lua; it counts as 0.
  local function num(v) return tonumber(v or '0') or 0 end
  local clock -- Redis's TIME, read once per script run
  local function time()
    if not clock then clock = redis.call('TIME') end
    return clock
  end
  local function now() -- ms
    local c = time()
    return tonumber(c[1]) * 1000 + math.floor(tonumber(c[2]) / 1000)
  end

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

  -- The waiters of key cf at level lv of gate.
  local function keyWaiting(gate, lv, cf)
    return redis.call('ZLEXCOUNT', lk('q', lv, gate), '[' .. cf .. SEP, '(' .. cf .. '\2')
  end

  -- The level entry e is parked at on gate, false if it is not there.
  local function levelOf(gate, e)
    for lv = 0, 2 do
      if redis.call('ZSCORE', lk('q', lv, gate), e) then return lv end
    end
    return false
  end

  -- The level of a request of class level base that arrived at arrival (µs),
  -- aging one level per aging ms, at now (ms).
  local function levelAt(base, arrival, aging)
    if base == 0 or aging <= 0 then return base end
    return math.max(0, base - math.floor((now() - math.floor(arrival / 1000)) / aging))
  end

  -- After a change at level lv of gate's queue: a level nobody waits at
  -- keeps no fair state; the gate's count of waiters, every level, is in
  -- 'queued', or, once nobody waits, no state at all (no backlog, no
  -- history). Returns the count.
  local function sync(gate, lv)
    local n = redis.call('ZCARD', lk('q', lv, gate))
    if n == 0 then
      redis.call('DEL', lk('t', lv, gate), lk('f', lv, gate))
    end
    for l = 0, 2 do
      if l ~= lv then n = n + redis.call('ZCARD', lk('q', l, gate)) end
    end
    if n == 0 then
      redis.call('DEL', gk('x', gate), gk('a', gate))
      redis.call('HDEL', KEYS[1], gate)
    else
      redis.call('HSET', KEYS[1], gate, n)
    end
    return n
  end

  -- Where the request of key cf (turn span cost, entry e) stands at level lv
  -- of gate: how many turns come before its own (counted up to limit), its
  -- turn T, its key's member in the level's t (false: the key has no turn
  -- there) and that turn's start. Every waiter of a higher level comes
  -- first; at its own level a key's waiters before e hold its earlier turns,
  -- and another key j with waiters has turns S_j, S_j + L_j, … for as many of
  -- them as wait.
  local function position(gate, lv, cf, cost, e, limit)
    local ahead = 0
    for l = 0, lv - 1 do
      ahead = ahead + redis.call('ZCARD', lk('q', l, gate))
    end
    if ahead >= limit then return ahead end
    local t, f = lk('t', lv, gate), lk('f', lv, gate)
    local tm = redis.call('HGET', f, 'l' .. cf)
    local mine, s, T
    if tm then
      mine = tm
      s = tonumber(redis.call('ZSCORE', t, tm))
      local before = redis.call('ZLEXCOUNT', lk('q', lv, gate), '[' .. cf .. SEP, '(' .. e)
      ahead = ahead + before
      T = s + before * turnCost(tm)
    else
      -- A key with no waiters here starts at vt, or where its last turn
      -- here ended if that is later (no credit for idling, no loss either).
      mine = turnOf(cost, cf)
      local h = redis.call('HMGET', f, 'vt', 'k' .. cf)
      T = math.max(num(h[1]), num(h[2]))
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
            ahead = ahead + math.min(c, keyWaiting(gate, lv, turnClient(j)))
            if ahead >= limit then break end
          end
        end
      end
      if #r < 2 * page then break end
      off = off + page
    end
    return ahead, T, tm, s
  end

  -- The request of key cf took a turn at level lv of gate (admitted through
  -- it while others wait), as position found it: the level's vt moves up to
  -- the turn's start and the key's next turn starts where this one ends.
  local function takeTurn(gate, lv, cf, cost, T, tm, s)
    local f = lk('f', lv, gate)
    local vt = num(redis.call('HGET', f, 'vt'))
    if tm then
      if s > vt then redis.call('HSET', f, 'vt', fmt(s)) end
      redis.call('ZADD', lk('t', lv, gate), fmt(s + turnCost(tm)), tm)
    else
      if T > vt then redis.call('HSET', f, 'vt', fmt(T)) end
      redis.call('HSET', f, 'k' .. cf, fmt(T + cost))
    end
  end

  -- Put entry e of key cf in level lv's queue of gate: a key without waiters
  -- there gets its turn, starting at max(vt, where its last one ended).
  local function attach(gate, lv, cf, cost, e)
    local f = lk('f', lv, gate)
    if not redis.call('HGET', f, 'l' .. cf) then
      local h = redis.call('HMGET', f, 'vt', 'k' .. cf)
      local tm = turnOf(cost, cf)
      redis.call('ZADD', lk('t', lv, gate), fmt(math.max(num(h[1]), num(h[2]))), tm)
      redis.call('HSET', f, 'l' .. cf, tm)
      redis.call('HDEL', f, 'k' .. cf)
    end
    redis.call('ZADD', lk('q', lv, gate), 0, e)
  end

  -- After a waiter of key cf left level lv of gate: the key's turn stays
  -- with its next waiter there; a key left with none keeps its turn's start
  -- for its next request.
  local function turnLeft(gate, lv, cf)
    if keyWaiting(gate, lv, cf) == 0 then
      local f, t = lk('f', lv, gate), lk('t', lv, gate)
      local tm = redis.call('HGET', f, 'l' .. cf)
      if tm then
        local s = redis.call('ZSCORE', t, tm)
        redis.call('ZREM', t, tm)
        redis.call('HDEL', f, 'l' .. cf)
        if s then redis.call('HSET', f, 'k' .. cf, s) end
      end
    end
  end

  -- Park entry e of key cf, of class level base, on gate (a waiter that is
  -- parked there already stays where it is, its expiry renewed): at the
  -- level its wait has earned, with a member in a:G for each level above it
  -- that it will reach. Returns the queue length, every level.
  local function enqueue(gate, base, aging, cf, cost, e, arrival, qexp, known)
    local cur = known and levelOf(gate, e)
    if cur then
      redis.call('ZADD', gk('x', gate), qexp, e)
      return sync(gate, cur)
    end
    local lv = levelAt(base, arrival, aging)
    attach(gate, lv, cf, cost, e)
    redis.call('ZADD', gk('x', gate), qexp, e)
    local a = math.floor(arrival / 1000)
    for l = lv - 1, 0, -1 do
      redis.call('ZADD', gk('a', gate), fmt(a + (base - l) * aging), l .. SEP .. e)
    end
    return sync(gate, lv)
  end

  -- Take entry e off gate's queue; reports whether it was there (its level,
  -- or false). The caller syncs that level.
  local function unqueue(gate, e)
    local lv = false
    for _, l in ipairs({ 1, 0, 2 }) do
      if redis.call('ZREM', lk('q', l, gate), e) == 1 then
        lv = l
        break
      end
    end
    if not lv then return false end
    redis.call('ZREM', gk('x', gate), e)
    if lv == 1 then
      redis.call('ZREM', gk('a', gate), '0' .. SEP .. e)
    elseif lv == 2 then
      redis.call('ZREM', gk('a', gate), '0' .. SEP .. e, '1' .. SEP .. e)
    end
    turnLeft(gate, lv, entryClient(e))
    return lv
  end

  -- leave takes entry e off gate's queue and syncs: the queue length after,
  -- false if e was not there.
  local function leave(gate, e)
    local lv = unqueue(gate, e)
    return lv and sync(gate, lv)
  end

  -- Move the entries of gate whose time to move up has come, each as a
  -- newcomer to its new level (its key's turn there, as attach gives it).
  local function promote(gate)
    local due = redis.call('ZRANGEBYSCORE', gk('a', gate), '-inf', now())
    if #due == 0 then return end
    redis.call('ZREMRANGEBYSCORE', gk('a', gate), '-inf', now())
    for _, m in ipairs(due) do
      local to, e = tonumber(string.sub(m, 1, 1)), string.sub(m, 3)
      local from = levelOf(gate, e)
      if from and from > to then
        local cf = entryClient(e)
        local tm = redis.call('HGET', lk('f', from, gate), 'l' .. cf)
        redis.call('ZREM', lk('q', from, gate), e)
        turnLeft(gate, from, cf)
        attach(gate, to, cf, tm and turnCost(tm) or 1000000, e)
        sync(gate, from)
      end
    end
  end

  -- Wake the waiter first in line on gate (the earliest waiter of the key
  -- whose turn comes first at the highest level with waiters, once the due
  -- promotions are made), on whichever replica it waits; an empty message
  -- if the state is inconsistent, so every replica re-checks its own.
  local function wake(gate)
    promote(gate)
    local first = ''
    for lv = 0, 2 do
      local t = redis.call('ZRANGE', lk('t', lv, gate), 0, 0)
      if #t > 0 then
        local cf = turnClient(t[1])
        local e = redis.call('ZRANGEBYLEX', lk('q', lv, gate), '[' .. cf .. SEP, '(' .. cf .. '\2', 'LIMIT', 0, 1)
        if #e > 0 then first = entryMember(e[1]) end
        break
      end
    end
    redis.call('PUBLISH', gk('free', gate), first)
  end

  -- Drop gate's queue entries that nobody renews any more (their replica is
  -- gone), as leaves. Returns the queue length after, or false if none lapsed.
  local function purgeLapsed(gate, t)
    local dead = redis.call('ZRANGEBYSCORE', gk('x', gate), '-inf', t)
    if #dead == 0 then return false end
    local n = false
    for _, e in ipairs(dead) do
      n = leave(gate, e) or n
    end
    return n or redis.call('ZCARD', gk('x', gate))
  end

  lib = {
    root = root, time = time, fmt = fmt, num = num, entryOf = entryOf, levelOf = levelOf, levelAt = levelAt,
    position = position, takeTurn = takeTurn, enqueue = enqueue, leave = leave, promote = promote,
    wake = wake, purgeLapsed = purgeLapsed,
  }
  return lib
end
