// Package session owns what Gatehouse knows of an agent's session: the
// session id a request carries (ID), the hash under which it is stored and
// shown (Hash), the affinity key that every turn of one conversation shares
// (Key), and the bindings of affinity keys to the connection that holds
// their prompt cache (Bindings).
//
// It imports only the standard library (and xxhash): the gateway fills it
// from headers and the body scan of package usage, and asks it which
// connection a request should try first.
package session
