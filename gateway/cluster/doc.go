// Package cluster is Gatehouse's admission controller for several replicas: the slots of
// every gate live in Redis as leases, so a gate's cap holds across every gateway replica
// that shares one Redis. It also keeps, for package ratelimit (Limits implements
// ratelimit.Store), the shared rpm turns, tpm windows, cooldowns, suspensions and learned
// caps, the shared affinity bindings (Affinity) and the session guard's shared spend and
// stops.
//
// It implements admission.Admitter (Acquire, TryAcquire, EstimateWait, SetCaps, Stats,
// Drain) and returns admission's types: a rejection is an *admission.Error
// (SEMAPHORE_TIMEOUT, SEMAPHORE_QUEUE_FULL) naming the gate, a permit is an admission.Grant
// released exactly once, and a fail-closed refusal is an *UnavailableError that matches
// admission.ErrUnavailable. Neither this package nor package gateway imports the other;
// cmd/gatehouse wires them.
//
// # Where the state lives
//
// Redis holds only leases, queues and the shared rate and health state; caps stay per
// replica. Every replica applies the same config snapshot (NOTIFY reaches all of them) and
// sends its caps with each attempt, so there is no second copy of the config to keep in
// step. Every key is under the hash tag {adm}, so the scripts touch one Redis Cluster
// slot; they declare the queued hash (and a queue gate's w: set) and name a gate's other
// keys from its gate key — legal on Redis and Redis Cluster, not on proxies that insist on
// every key being declared. Per gate key G:
//
//	<prefix>:{adm}:h:G       sorted set  lease id <replica>:<n> → lease expiry (ms, Redis clock)
//	<prefix>:{adm}:queued    hash        G → waiters parked on G (no field: nobody)
//	<prefix>:{adm}:q:G       sorted set  <client>\1<arrival µs>\1<waiter id> → 0 (by key, then arrival)
//	<prefix>:{adm}:x:G       sorted set  queue entry → its expiry (2/3 of the TTL)
//	<prefix>:{adm}:t:G       sorted set  one turn per key waiting on G → its start tag
//	<prefix>:{adm}:f:G       hash        fair state while G has a queue (virtual time, turns)
//	<prefix>:{adm}:w:G       sorted set  waiters whose queue gate is G → expiry
//	<prefix>:{adm}:replicas  sorted set  replica id → expiry
//	channel <prefix>:{adm}:free:G        the waiter first in line, when a slot freed
//
// Per connection C the shared limits keep turn:C (next free dispatch time), tpm:C (window
// start, tokens used), hl:C (suspended until, whole-connection and per-model cooling
// until) and learn:C (gate → learned cap, kept 24 h); a client key's use the id
// key:<key id>. Durations, not instants, cross the wire, so replica clocks need not agree.
//
// # Admission
//
// An uncontended request is two round trips: an admit and a release, each one MULTI/EXEC
// transaction of plain commands (EVALSHA costs several µs in Redis before its first
// command). The admit sends only the path's capped gates (a path with none makes no Redis
// call): one HMGET of the queued hash, then per gate a ZADD of the lease and a ZCARD. If
// nobody waits and no gate is over its cap, it is admitted; otherwise the leases just
// added are taken back at once (waking the first in line where that leaves room) and the
// request runs lua/acquire.lua (fair.lua in front), which every re-check of a waiter runs
// too. A gate lets a request through when its free slots exceed the turns before the
// request's own there in start-time fair order (docs/ADMISSION.md, "Fair share in the
// ledger"), so a newcomer never overtakes a waiter whose fair turn comes first. A blocked
// request is parked on the first gate that blocked it only, in its key's line by arrival,
// so a waiter blocked by model A never delays model B. Through a Redis Cluster client, or
// before the first heartbeat, admit.lua does the same in one script. Scripts are
// idempotent per lease id, and a retried attempt that a lost reply had admitted finds its
// own lease: a go-redis retry never takes two slots. A gate that becomes capped counts the
// permits already running through it: SetCaps enters their leases before it returns.
//
// Admit and release calls made together share one pipeline (coalesce.go): the caller that
// finds none in flight sends everything queued so far and hands the lead on; a batch whose
// transaction Redis discards (EXECABORT) is sent again call by call, so one refusal fails
// no other. The gateway gives a permit back with ReleaseSoon: the release is queued for
// the next pipeline and nobody waits for its reply, so the release's round trip is
// neither between the answer's last byte and the client nor between the handler and the
// connection's next request. It rides with the calls queued after it — the admits of the
// next requests, which it precedes in Redis (calls go in the order queued). With no
// pipeline in flight, a release through gates with room to spare (nobody waiting there as
// far as this replica knows, at least half the cap free with the slot and the kept leases
// still held) waits
// up to 1 ms for one (a "lazy" release; a timer sends it otherwise); any other release is
// sent at once by a goroutine of its own. The slot is thus free in Redis up to 1 ms later,
// which can only make the ledger stricter, and only where half the cap is free anyway.
// Where the gates are that roomy and Redis counted them within keepFresh (20 ms) with
// nobody waiting, the release does not even do that: the lease stays in Redis, kept for
// the next request on the same path, which takes it over without a Redis call; a lease
// not taken within keepIdle (5 ms) goes back as a lazy release (keep.go). A kept lease
// counts in Redis like a permit's, so caps hold; other replicas' waiters may wait up to
// keepFresh plus keepIdle longer on a gate this replica saw at most half full.
// Its replies are read where it is sent (expired leases counted, waiters woken as Release
// does), and Close sends the lazy ones at once and waits for every one. While calls come
// together, the caller about to lead a pipeline yields the processor once first, so
// handlers already runnable queue their calls into it rather than the next. Argument
// buffers are pooled and gate keys, caps and the TTL boxed once, so the transactions
// allocate nothing of their own.
//
// # Release and waking
//
// A release is one transaction: a ZREM of the lease from each gate it leased, then an
// HMGET of queued; where a slot freed and somebody waits, wake.lua publishes the id of the
// waiter first in line (a second round trip, only when contended). Removing first and
// reading afterwards is enough without a script: a waiter queued before the HMGET is seen,
// one whose acquire ran after the ZREM saw the slot free. Each replica subscribes to the
// channels of the capped gates; the replica holding the named waiter re-checks it, and
// the script names the next one when room is left, so a release costs one re-check in the
// whole cluster. Every Recheck (1 s) each replica re-checks its earliest waiter per key
// and gate, so a lost message, a silent lease expiry or a dead replica only delays a
// wake-up; a message heard between a request's acquire script and its local park is
// counted per gate and re-checked at once.
//
// # Leases and lost replicas
//
// A lease lives LeaseTTL (GATEHOUSE_CLUSTER_LEASE_TTL, 15 s) from its last renewal; each
// replica renews its leases, queue entries and registration in one script every TTL/3.
// Queue entries live two renew periods, so a replica that loses its client stops holding
// other replicas' waiters back before its slots come back. A renewal never recreates an
// entry that is gone (its slot may be someone else's): the lease is counted lost once
// (LostLeases) and the request keeps running.
//
// # Redis away
//
// Any failed or timed-out call (OpTimeout, 1 s) switches the replica to its fail mode at
// once and wakes its waiters: FailOpen admits through an in-process admission.Controller
// whose caps are each cap divided by the live replicas last seen (at least 1), FailClosed
// refuses with an *UnavailableError (503 CLUSTER_UNAVAILABLE). The replica probes Redis
// every Recheck; the first good heartbeat runs rejoin.lua, which enters every fail-open
// permit still running as a lease and removes the queue entries of waiters it dropped, and
// only then switches back (under the controller's mutex, and only if no fail-open permit
// was admitted meanwhile). Known gaps: the fallback does not count the Redis permits the
// replica still holds; other replicas' fail-open permits overshoot until Redis returns; a
// Redis that restarts empty has lost every lease, so for up to one request duration a cap
// may be exceeded (the lost leases are logged).
//
// # Shared limits and health
//
// Reads go through one read-only script per connection (suspension, cooldowns, tpm window,
// learned caps), cached 250 ms per replica; writes happen only on 429/401/403, per
// response with tpm, and per dispatch with a spacing. A turn beyond the request's
// remaining wait is refused by the script, as in process, and a turn not used goes back
// (turnback.lua) only while no later turn was reserved anywhere. Learned caps move by
// compare-and-set, so a burst of 429s seen by several replicas cuts once cluster-wide.
// A cooldown set elsewhere is not cleared by a success here, the backoff streak and
// circuit breakers stay per replica, and Redis errors fall back to the in-process state
// for 1 s, logged once a minute at most.
//
// # Observability
//
// Stats makes no Redis call: InFlight and Queued are the cluster-wide counts last seen
// (every attempt, heartbeat and admission returns them), never below this replica's own;
// Waiting, QueuedByClient and the counters are this replica's. A grant answers
// InFlightAt(gate), the holders of that gate across the cluster at its admission, which
// the adaptive learner needs to tell that a request found a shared gate full.
package cluster
