// Package httpkit holds what the dashboard (package ui) and the REST API (package api)
// share, so that neither imports the other: the wiring's Deps and the gateway-facing
// interfaces (GateSource, SessionSource, AlertSource, Prober), and Core, the one
// place both surfaces call for
//   - answers: problem+json (problem.go, the only place that gives errors a status)
//     and JSON bodies (json.go);
//   - reading requests: bounded JSON bodies with strict syntax and merge-patch
//     (body.go), the body-read deadline (bodytimeout.go), the client address behind
//     trusted proxies (clientaddr.go);
//   - validation: the one validator and the field-problem codes with their English
//     words (validate.go), connection and client-key documents (connectionbody.go,
//     clientkeybody.go), the upstream deny list (upstreamdeny.go), the request log's
//     filters (requestfilter.go);
//   - authentication: API tokens and their roles (apiauth.go), and the throttles on
//     failed sign-ins and failed bearer tokens (throttle.go, auththrottle.go);
//   - the live view of gates, health and budgets (gates.go), sessions' stop and
//     resume (sessions.go) and alert deliveries (alerts.go).
package httpkit
