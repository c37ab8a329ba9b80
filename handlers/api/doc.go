// Package api serves the REST API under /api/v1: connections, settings, client keys
// and API tokens (JSON documents with ETags and If-Match), the live gates, the
// request log and usage, sessions, alerts, the audit log, the whole configuration
// document (export and apply, also used by the config command) and the OpenAPI
// document (openapi.yaml, embedded; tests hold every route to it).
//
// Every handler has the Handler shape: it writes its whole answer and returns nil,
// or returns an error, which Serve maps to problem+json (httpkit.Core.WriteProblem).
// The routes themselves are listed in handlers/routes.go.
//
// Field rules beyond DESIGN.md: models entries follow the model-key rule and are
// unique; baseUrl has no query, fragment or credentials (≤ 2048); apiKey 1–4096
// printable ASCII; names 1–64. null for priority, enabled or rateLimitOverrides means
// the default; null for any other field that cannot be absent is 422; duplicate JSON
// keys are 422 with their paths. PATCH applies the merge patch to the row as the API
// shows it inside the store's transaction (row lock) and decodes the result strictly,
// so two PATCHes of different fields both survive; If-Match is compared in the same
// transaction. A stored override hand-edited into something malformed makes every
// PATCH of it 422 until fixed: nothing is dropped silently. GET /api/v1/settings shows
// the value in force for every key; only keys a write set are stored. The audit actor
// is token:<name>, user:<email>, config:<token name> / config:cli, or system. A base
// URL moved to another origin needs apiKey (the stored key never follows a URL); a
// baseUrl that names or resolves to a denied address (GATEHOUSE_UPSTREAM_DENY) is 422.
// Failed bearer authentication is throttled per client address (20 free, then 30 s
// doubling to 15 min), answered before the secret is checked; valid keys from other
// addresses are served as always.
//
// Declarative config: the CLI (ConfigTool) and the two API routes share one decode,
// validate and plan path; YAML is converted node by node to JSON with numbers keeping
// their text and read by the same strict decoders; tags other than the core schema's
// are refused with their path; aliases bounded at 200 000 values. Identity is the
// name; a top level key left out is not declared, so a file of only settings cannot
// delete connections. ${ENV_VAR} in apiKey is resolved by the CLI only
// (GATEHOUSE_SECRET_* other than GATEHOUSE_SECRET_KEY, or --env-allow); the HTTP
// endpoint refuses references, since resolving them from the server's environment
// would let a token holder copy a server secret to an upstream of their choosing. GET
// /api/v1/config needs an admin token.
package api
