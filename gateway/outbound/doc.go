// Package outbound owns the upstream clients: FastTransport (fasthttp's HostClient, doing
// its I/O on the caller's goroutine, the default) and NewTransport (net/http's Transport),
// both http.RoundTrippers chosen once at wiring time (GATEHOUSE_OUTBOUND); their
// connection pools, the check of an idle pooled connection before a request is written on
// it, and the one retry, on a fresh connection, of a request that met a stale one; the
// conversion of a fasthttp answer into an http.Response whose body streams; the header
// rules of the outbound leg (which client headers go upstream, which upstream headers come
// back); and the upstream deny list (GATEHOUSE_UPSTREAM_DENY: Deny, parsed here for the
// API's write check too), which both clients' Dialer enforces on the address it connects
// to.
//
// It never decides where a request goes, never retries beyond that one stale-connection
// case (failover is the gateway's), never reads or rewrites a body it carries, and never
// knows of connections, limits or the gateway.
//
// # Why fasthttp is the default
//
// In interleaved runs on a quiet machine it used 13–20 % less CPU per request than
// net/http, with and without streaming, at the same streaming throughput (docs/BENCHMARKS.md).
// What net/http has and it lacks — HTTP/2 to upstreams, cancellation without closing the
// connection, answer headers beyond 8 KiB, a default User-Agent — is one
// GATEHOUSE_OUTBOUND=net/http away. The gateway's tests run on both clients.
//
// How FastTransport keeps what the gateway relies on:
//
//   - Cancellation: fasthttp has no context, so the transport is built from fasthttp's
//     exported pieces and registers context.AfterFunc(ctx, conn.Close) on the connection
//     it takes: a client that hangs up, or the execution bound, closes the upstream
//     connection at once, and such a connection never returns to the pool.
//   - Streaming: the body reads from the connection as data arrives, and a Read also
//     returns the chunks already whole in the read buffer, so a burst of events is one
//     write and flush to the client and an event that arrived is never held back.
//   - Request body: an attempt's RawBody is sent as it is (no copy), headers and a small
//     body in one write.
//   - Allocations: the attempt's http.Request stays on its frame, its header map comes
//     from a pool (GetHeader, PutHeader), and the answer's headers are built as
//     http.Header.Clone builds them. net/http may still write a request after RoundTrip
//     returns, so its requests get fresh maps.
//   - Reuse: one HostClient per scheme and host, most recently used first, 30 s idle.
//     Before a request is written on a reused connection a non-blocking MSG_PEEK drops it
//     if the upstream closed or wrote to it while idle. A reused connection that still
//     fails before any answer byte is retried once on a fresh one, only when the request
//     was not written whole or carries Idempotency-Key; otherwise the upstream may have
//     run it, and UnansweredError (Sent) makes the gateway answer 502 without failing
//     over: a paid request is never sent twice. A Stale failure never counts toward the
//     breaker.
//
// # Headers
//
// Both directions are allowlists, one string switch and a prefix test per header with no
// allocation. Upstream go Content-Type, Accept, User-Agent, anthropic-version,
// anthropic-beta, OpenAI-Beta, Idempotency-Key, X-Stainless-*, traceparent and tracestate
// (less any the client's Connection header names), then the connection's key: never the
// client's credentials, cookies or OpenAI-Organization/-Project (they would pick another
// account under the stored key), and not Accept-Encoding, so answers arrive uncompressed
// for the usage tap. Back come Content-Type, Content-Length, Cache-Control, x-request-id,
// request-id, openai-processing-ms and Retry-After: never Server, CORS headers, cookies or
// the shared account's rate-limit headers.
//
// # The deny list at dial time
//
// Dialer resolves a name itself, leaves out denied addresses and connects to an allowed
// one as resolved, so the address checked is the address connected to (no second lookup);
// a denied name is refused without a lookup. When every address is denied the dial fails
// with DeniedError, which the gateway answers 502 and fails over from without counting it
// toward the breaker. An entry covering loopback also denies 0.0.0.0/8 and ::, which reach
// the local host too, and mapped addresses are unmapped before the check.
//
// The net/http Transport keeps its 4 KiB buffers: an idle pooled connection holds both and
// the relay reads through its own 16 KiB buffer, which bufio passes straight through.
package outbound
