// Package health keeps what the gateway knows of an upstream's health: per connection
// (Conn) the cooldowns after 429s (per model, with backoff), after rate-limit headers
// that say the account is spent and after a usage window runs out (the whole connection),
// the cooling of one (route, model) after a 403, the suspension after a 401 and the
// circuit breaker; the reading of Retry-After, of the providers' rate-limit headers and of
// their usage windows (ParseWindows); the adaptive learner (Learner), which moves each
// adaptive gate's effective cap by additive increase and multiplicative decrease; and the
// shadow gates (Shadows), which count what a cap would have done without enforcing it.
//
// It never admits, queues or sends a request, never sets a cap in admission itself (the
// gateway pushes the caps the Learner reports, through Caps), never builds gate keys (the
// gateway hands them in, from package gates), and never reaches another replica except
// through the CapStore it is given.
//
// # States
//
//	ok
//	cooling (connection + model)   a 429; until Retry-After (capped at 1 h), else backoff 1 s … 5 min
//	cooling (whole connection)     a rate-limit header with nothing left (until its reset, ≤ 60 s),
//	                               or a usage window at 100 % or "rejected" (until its reset)
//	cooling (route + model)        a 403; for breakerCooldownMs
//	suspended                      a 401, or 403s on two (route, model)s within suspendMs
//	breaker-open, half-open        breakerFailures consecutive 408/5xx/transport failures (gobreaker)
//
// A deadline is time-bound only: a success ends the backoff streak, never a deadline (an
// answer to a request dispatched before the 429 may arrive after it), and a later answer
// never shortens it; an admin's health reset clears it. One 403 never takes a connection
// from every tenant: a restricted key lacking one endpoint or model keeps serving the
// rest. A local admission rejection never counts as an upstream failure, nor does a
// refusal by the deny list or a stale pooled connection.
//
// # Rate-limit headers and usage windows
//
// Every answer is looked at for a remaining header equal to "0" (OpenAI's
// x-ratelimit-remaining-requests/-tokens with their Go-duration resets, Anthropic's
// anthropic-ratelimit-*-remaining with RFC 3339 resets); the earliest future reset of the
// exhausted dimensions, capped at 60 s so a daily limit cannot take a connection out for
// hours on one answer, cools the whole connection. The common path is six map lookups and
// no allocation. count_tokens answers are not read: Anthropic limits token counting apart
// from inference. Usage windows (Anthropic's unified 5h/7d utilization, Codex's
// x-codex-primary/secondary, named by their window minutes) replace the connection's set
// on every answer that reports any; a full or rejected window cools the connection until
// its reset, not capped at a minute — the provider says the account is spent until then.
//
// # Adaptive caps
//
// On an adaptive connection each capped gate gets an effective cap, 1 … the configured
// cap, kept per gate key so it outlives config snapshots; admission only ever sees the
// effective cap (a lowered cap cuts nobody, as any live cap change). A 429, 503 or 529, or
// an error body naming concurrency or overload, cuts every adaptive gate on the path to
// ⌊0.7 × cap⌋ (at least 1 lower, never below 1), at most once per cut window
// (max(1 s, the gate's mean hold)), so requests rejected together count once. 10 × cap
// successes that found the gate full, in a row since the last cut, raise it by 1 — a
// success that found room neither counts nor breaks the row (it says nothing about the
// cap, and a strict row never climbed on a loaded machine) — and no raise comes within
// 10 s of a cut, so a limit that holds is probed about once every 10 s for one rejection.
// An overload rejection without Retry-After only cuts (too many at once is not "stop for
// a while"); a plain 429 cuts and cools. In cluster mode "found the gate full" also
// counts the cluster-wide holders the admission returned (LearnPath.FullAcross), or a cap
// shared by replicas would never climb again, and the learned value is shared by
// compare-and-set through the CapStore. Changes are logged at most once per gate per 10 s.
//
// # Shadow gates
//
// rateLimitOverrides.shadow caps are counted, never enforced: dispatched requests,
// wouldQueue (arrived with in-flight already at the shadow cap) and peakInFlight, by atomic
// adds on gates built at Apply (no lock, no allocation on the request path). A reload with
// the same shadow cap keeps the counts; a changed one starts afresh.
package health
