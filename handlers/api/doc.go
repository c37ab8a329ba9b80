// Package api serves the REST API under /api/v1: connections, settings, client keys
// and API tokens (JSON documents with ETags and If-Match), the live gates, the
// request log and usage, sessions, alerts, the audit log, the whole configuration
// document (export and apply, also used by the config command) and the OpenAPI
// document (openapi.yaml, embedded; tests hold every route to it).
//
// Every handler has the Handler shape: it writes its whole answer and returns nil,
// or returns an error, which Serve maps to problem+json (httpkit.Core.WriteProblem).
// The routes themselves are listed in handlers/routes.go.
package api
