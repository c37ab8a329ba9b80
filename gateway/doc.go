// Package gateway is Gatehouse's proxy: it authenticates client keys, routes each request
// by its model (or alias) to the provider connections serving it, admits it through the
// concurrency gates of package admission, holds its budgets (package ratelimit), forwards
// it upstream (streams included) and fails over between connections on upstream 429s,
// auth failures and errors, keeping per-connection health (package health); it follows
// session affinity and the runaway guards (package session), emits alerts (package alert),
// and fills one request-log record per request. It is the glue that hands gate keys, caps
// and limits to the packages below it; none of them imports it.
//
// The configuration arrives as an immutable Config through Apply; the gateway never reads
// the store itself. Health, learned caps, rate state and bindings are kept by connection or
// key id and outlive snapshots.
//
// # Admission and choice
//
// Every attempt's path has four gates — global, provider:<p>, connection:<id>,
// model:<id>:<M> — even when some are uncapped, so a gate that becomes capped already
// counts what runs through it; a key with maxConcurrent heads the path with key:<id>
// (built in a buffer in the exchange: no allocation). Apply pushes a new snapshot's caps in
// place (SetCaps): raising admits waiters at once, lowering cuts nobody. Candidates are
// ordered by priority, equal priorities rotated (or placed by usage-window headroom once a
// window is known); the first whose gates have room now takes the request, else it queues
// on the one with the shortest expected wait. maxWaitMs bounds the request's whole wait
// across candidates and turns, not each wait. A request that queued re-checks its
// connection once admitted and starts over (at most 4 times) if it cooled, was suspended,
// opened its breaker or ran out of budget meanwhile, so requests queued behind a 429 never
// reach that upstream. Each attempt holds its own permit; at most maxAttempts attempts.
//
// When Options.Admission is exactly an admission.Local, the gateway admits into a Permit
// kept in the request's exchange and hands out that pointer as the grant, so admission
// allocates nothing per request; through the Admitter interface it would escape.
//
// # Failover and answers
//
// A 429 cools the model (or only cuts an adaptive cap), 401 suspends, 403 cools that
// (route, model), 408/5xx and transport errors count against the breaker, and the request
// fails over; 400/404/422 go back unchanged and change no health. When nothing is left:
// all cooling → 429 UPSTREAM_COOLDOWN, none healthy and no upstream answer → 503
// NO_HEALTHY_CONNECTION, otherwise the last upstream answer. A request written whole on a
// connection that then closes without answering is 502 and never resent
// (outbound.UnansweredError). An admission error that is neither the client leaving nor
// typed follows the cluster fail mode, never an empty 200. The execution bound covers
// headers and body: 504 before headers, an SSE error event after a stream started; a plain
// body that breaks mid-way aborts the client connection rather than end silently
// truncated. The client's query string is not forwarded (but Gemini's alt).
//
// # Routes without admission
//
// count_tokens and Gemini's countTokens are no inference: no slot, no queue, no
// connection turn, no budget — sizing a request must not wait behind the requests it
// sizes. They take the key's own rpm turn, fail over among healthy connections, never take
// a half-open breaker's probe, and neither cool nor heal a model on success or 429
// (Anthropic limits them apart). GET /v1/models and /v1/gatehouse/limits are answered from
// the snapshot right after authentication; a key with a models list sees only what it may
// use, and another model's retrieve is 404, not 403 (which would tell it exists).
//
// # Keys, priority and signals
//
// A key's limits are prepared once per config (clientkey.State, its Carry outliving
// configs by id). Its rpm turn is taken before any gate, so a key pacing itself holds no
// slot while it waits; its tpm, tpd and money budgets are checked before queueing (a spent
// key is answered at once) and reserved, all or nothing with the connection's, right
// before dispatch; none of them fails over, since the limit is the client's.
// X-Gatehouse-Priority may lower the key's class for one request. Every answer after
// routing carries X-Gatehouse-Queue-Ms, and a key with rates gets OpenAI-style
// X-RateLimit-* headers from the same numbers as the live view.
//
// # Aliases and Gemini
//
// Aliases resolve once, before the route table, on every route: the targets, gates and
// the key's models check are the target's, and the body's model is rewritten to the
// upstream id as for provider/model; the log keeps both names. A Gemini route reaches only
// gemini connections (routes are per style), with per-model URLs prepared once per target.
//
// # Request log
//
// Every /v1 request fills a RequestRecord at its end (in begin for one refused before it
// ran, in end otherwise) and hands it to Options.RequestLog. The record lives in the
// exchange and its strings are the config's, so logging allocates nothing per request.
// Status 499 means the client went away; code and gate are those of an error Gatehouse
// answered itself; the connection is the last one dispatched.
//
// # Shutdown
//
// Drain wakes every queued waiter with SHUTTING_DOWN and from then on answers every
// request, failover attempts included, 503 SHUTTING_DOWN with Retry-After: 1: a replica
// going away starts no work. When the shutdown timeout runs out, the base context is
// cancelled with ErrShuttingDown: a stream ends with an SSE error event.
//
// # Small frames under a queued request's wait
//
// A request waiting for admission parks under net/http's conn.serve, the mux and the chain
// ServeHTTP → run → choose → queue → AcquireInto → wait. Everything on that chain must fit
// the ~3 KiB a 4 KiB stack leaves, or the goroutine moves to an 8 KiB stack and keeps it
// for the whole wait. So the choice's state lives in the exchange (x.cur, x.cand, x.qReq,
// x.qPermit, on the heap) rather than on frames, the work before and after the wait is
// done in callees beside the chain (healthy, admitNow, orderByWait, waitRequest, awaited,
// begin, end), and a few error builders are //go:noinline. The frames under the wait are
// about 0.4 KB.
package gateway
