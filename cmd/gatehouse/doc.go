// Command gatehouse runs the Gatehouse LLM gateway, its dashboard and REST API, and the
// administrative subcommands (migrate, user, token, key, config, demo-traffic).
//
// It is also all the wiring: store rows become an immutable gateway.Config (reload.go: the
// config loader, debounced on NOTIFY gatehouse_config, with a periodic full reload; the
// client-key cache; store errors translated into the gateway's), GATEHOUSE_REDIS_URL
// becomes the cluster controller and shared limits (cluster.go), OTEL_* variables a tracer
// provider (tracing.go), and serve (serve.go) runs the listeners, the alert watcher and the
// shutdown. The server's variables are read here only; every other package takes values.
//
// # Decisions
//
//   - Usage errors before the database: user add, token create and key create check their
//     flags (and key create its limits, with the flag names), and every command rejects a
//     stray argument, before a managed Postgres is started. GATEHOUSE_CLUSTER_FAIL_MODE and
//     GATEHOUSE_CLUSTER_LEASE_TTL are checked at start with or without Redis.
//   - serve listens before it creates the demo admin and the bootstrap token and key: a
//     start on a taken port exits 1 having created nothing. GATEHOUSE_ADMIN_PASSWORD only
//     chooses the first password; a later start names gatehouse user passwd.
//   - The demo's fake upstream keeps its address in the data dir (demo-upstream-addr), so
//     the demo connections, a config exported from them and connections pointed at it stay
//     valid across starts; it moves (repointing the demo connections) only when the port is
//     taken. demo-traffic sends GET /healthz first and exits 1 naming the error when the
//     gateway is unreachable or every request failed.
//   - Redis: the URL is parsed with redis.ParseURL (a parse error never echoes it) and
//     dialled once per attempt (go-redis's 5 dials would outlast the controller's 1 s
//     operation timeout); a Redis that does not answer at start does not stop serve, which
//     starts in its fail mode. go-redis's process-wide logger is replaced by an adapter over
//     slog, so stderr stays one JSON object a line while Redis is away.
//   - The metrics listener (GATEHOUSE_METRICS_ADDR) is a second http.Server whose mux holds
//     only GET /metrics, without a token, with a plain ReadTimeout (GET only).
//   - Shutdown: /readyz turns 503, Gateway.Drain answers every queued request 503
//     SHUTTING_DOWN and every later one too, the WebSocket bridge closes idle sockets, and
//     http.Server.Shutdown runs with GATEHOUSE_SHUTDOWN_TIMEOUT on every listener; when it
//     runs out, the base context is cancelled with gateway.ErrShuttingDown (streams end with
//     an SSE error event), and after 2 s more the servers close. Then the config loader, the
//     cluster controller (leases given back), the tracer (flushed, 5 s) and the managed
//     Postgres stop, and the process exits 0.
//   - serve sets GOGC=400 and GOMEMLIMIT=512MiB unless the environment sets them: at GOGC
//     100 the collector costs about 6 µs a request.
//   - Runnable README snippets: a block after <!-- runnable --> in README.md or
//     docs/OPERATING.md is run as written against a fresh demo by TestReadmeSnippets (sh
//     with bash -euo pipefail in one terminal-like sequence, then the JavaScript SDK
//     snippets with node); the fresh-database block by TestReadmeFreshDatabase;
//     TestHelpMatchesReadme keeps the README's Commands block and --help the same.
package main
