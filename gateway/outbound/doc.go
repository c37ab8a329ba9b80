// Package outbound owns the upstream clients: FastTransport (fasthttp's
// HostClient, doing its I/O on the caller's goroutine, the default) and
// NewTransport (net/http's Transport), both http.RoundTrippers chosen once
// at wiring time; their connection pools, the check of an idle pooled
// connection before a request is written on it, and the one retry, on a
// fresh connection, of a request that met a stale one; the conversion of a fasthttp answer
// into an http.Response whose body streams; the header rules of the
// outbound leg (which client headers go upstream, which upstream headers
// come back); and the upstream deny list (GATEHOUSE_UPSTREAM_DENY: Deny,
// parsed here for the API's write check too), which both clients' Dialer
// enforces on the address it connects to.
//
// It never decides where a request goes, never retries beyond that one
// stale-connection case (failover is the gateway's), never reads or
// rewrites a body it carries, and never knows of connections, limits or
// the gateway.
package outbound
