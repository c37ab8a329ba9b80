// Package ui serves the dashboard: server-rendered pages (templates in package web)
// for operators signed in with a session cookie (httpkit.SessionStore), with the sign-in
// throttle, the cross-origin write guard (http.CrossOriginProtection), the language
// choice, flashes, the live fragments the pages poll, CSV downloads and the gate
// history behind the sparklines.
//
// Handlers have the uiHandler shape and return errors; Serve wraps each with the
// session, the role check and an HTML error page for the error. The routes
// themselves are listed in handlers/routes.go.
//
// Sessions: our own gorilla sessions.Store over the sessions table, not a cookie
// store, so sign-out, a password change or a deleted user really end a session. The
// cookie holds a random 32-byte id; the table keys rows by its SHA-256, so a dump
// holds no usable cookie. HttpOnly, SameSite=Lax, Secure over TLS or behind a proxy
// saying https (or always with Deps.SecureCookies). Expiry slides: 12 h after the last
// save, saved again at most every 10 minutes. Signing in rotates the id, so a planted
// id never becomes a signed-in session.
//
// Sign-in throttling (in memory, per process): three keys charged per attempt —
// account + address (5 free failures, then a wait doubling from 30 s to 15 min: 429),
// address (20 free failures: 429), account from every address (10 free failures, then
// the password check is delayed, doubling from 250 ms to 2 s: never a 429). Only keys
// holding the client's address refuse, so a stranger cannot lock the owner out; the
// account key can only slow guesses. An attempt is charged under one lock before the
// argon2id check, so parallel guesses cannot skip it; a right password refunds the
// address's charge and clears the pair and account keys; nothing is permanent (keys
// forgotten 15 min after their last failure). At most 10 000 keys (LRU), SHA-256
// digests salted per process, so the table holds no e-mail or address.
//
// CSRF is http.CrossOriginProtection around every dashboard route plus SameSite=Lax:
// no form tokens. Sign-out is a POST; GET /logout only shows the button. Creating a
// key or token answers 201 with the secret on the page once (a flash would keep the
// secret in the session table). Roles: viewer reads, admin writes; write routes are
// marked uiWrite and, as defence in depth, any non-GET/HEAD from a viewer is 403. The
// user is reloaded on every request, so a role change applies at once. Edit forms
// carry a hidden version (a stale one: 409 conflict banner); a POST without version is
// an unconditional write. /account changes your own password after a check charged
// like a sign-in; success ends every other session of the user.
//
// Every page sends DESIGN.md's Content-Security-Policy, Cache-Control: no-store and
// nosniff. Overview history: a ring of 120 gate snapshots taken lazily (when the
// newest is older than 5 s on an overview or /live request): no goroutine, sparse
// while nobody looks. The overview's errors and volume come from the request log
// (store.RecentTraffic, store.DayTotals), cached a second, so any number of open
// overviews cost one read a second and the numbers are cluster-wide and match the
// /requests rows they link to. Test connection posts to /connections/{id}/test and
// runs Gateway.Probe: one request through the path every request takes, bound to that
// connection, under a key of its own, not logged in the request log, audited (never
// the answer's text).
package ui
