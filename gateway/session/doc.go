// Package session owns what Gatehouse knows of an agent's session: the session id a
// request carries (ID), the hash under which it is stored and shown (Hash), the affinity
// key that every turn of one conversation shares (Key), the bindings of affinity keys to
// the connection that holds their prompt cache (Bindings), and the runaway guards (Guard):
// a session's requests in flight, its spend, its loops and an operator's stop.
//
// It imports only the standard library (and xxhash): the gateway fills it from headers
// and the body scan of package usage, and asks it which connection a request should try
// first and whether a session may go on.
//
// # Ids and keys
//
// A session id comes from X-Gatehouse-Session, X-Claude-Code-Session-Id or session_id,
// then the body's prompt_cache_key or metadata.user_id; it is cut to 256 bytes and never
// kept: the request log, traces and the API see only Hash (16 hex digits of SHA-256 of key
// id, NUL, id). The affinity key is a 64-bit xxhash of (key id, model, session id or
// conversation hash, system hash) — xxhash, not hash/maphash, because replicas must agree
// on it without sharing a seed. A part longer than 2 KiB is hashed by its length, first
// KiB and last KiB: system prompts and tool lists are tens of KiB and differ early, late
// or in length, and a collision only puts two conversations on one binding. Distinct
// system prompts under one session id (subagents) are distinct keys.
//
// # Affinity
//
// A request follows a binding when it has a session id or continues a conversation; a
// one-message request without an id only writes the binding its next turn follows (and
// only when none exists, checked under a read lock), or identical one-off requests would
// all pin one connection. The gateway tries a bound connection alone, waiting at most
// affinityMaxWaitMs, then places the request as usual; the binding is written on every
// 2xx, so a spilled session stays where it was served, and a disabled, suspended or
// cooling connection is simply no candidate, so its sessions move without a failed
// request. Unbound requests are placed by most usage-window headroom, then fewest
// bindings (rotation alone left one of four accounts 12 % of sixteen sessions' requests).
// Bindings is one mutex over a map into a slice of entries linked by recency, TTL checked
// on read, the least recently used dropped at maxAffinityBindings: 100 000 bindings take
// about 7 MB. In cluster mode gateway/cluster's Affinity shares bindings through Redis,
// asked only when this replica has none and written when new, moved or half-stale, before
// the answer is relayed (the next turn may reach another replica). Gemini-style requests
// (the model in the path, the body not scanned) carry no affinity key.
//
// # Runaway guards
//
// The guard sits after the key's budgets and before the connection choice.
// sessionMaxConcurrent is a per-session FIFO semaphore of the guard, not an admission
// gate, so a session's waiters hold no key or connection slot and the gates stay bounded
// by the config (sessions are unbounded); its refusal keeps the key cap's wire shape (429
// SEMAPHORE_TIMEOUT at session:<hash>). sessionBudgetUsd is reserved beside the key's
// money budgets and settled with them. The loop fingerprint is an xxhash of the last two
// messages with the values of id, tool_call_id, tool_use_id and call_id skipped (found
// with bytes.IndexByte: under a microsecond for a 6 KiB turn). A refusal for a loop or the
// budget, and an operator's stop, hold until the session has been idle for affinityTtlMs
// or is resumed; a refused request counts as activity. Every session is counted for
// /sessions whether or not a guard is set, swept when idle for max(15 min, affinityTtlMs)
// from the request path (no goroutine). In cluster mode the spend and operators' stops are
// shared through Redis (stops read again at most once a second); loop holds and the
// listing stay per replica.
package session
