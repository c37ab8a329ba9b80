// Package ratelimit keeps the rate limits of connections and client keys:
// the rpm/minTime dispatch spacing (a turn per request, waited for while
// the request holds its permit), the tpm minute window with its debt and
// running estimate, and the rpd/tpd day counts through a UsageCounter
// (memory as cache and as fallback, fail-open). State is the in-process
// state of one connection or key, carried over config snapshots by the
// caller; Local and Shared are the two ways of keeping the spacing and the
// tpm window, chosen once at wiring time: in this process, or in a Store
// every replica sees (cluster mode: gateway/cluster's *Limits over Redis),
// with the in-process state alongside and in charge while the store fails.
// Shared also carries what the same store keeps of an upstream's health
// (cooldowns, suspensions, learned caps), since one View reads it all.
//
// It never admits or queues a request (that is admission), never decides
// where a request goes, never builds the rejection a client sees (the
// gateway words it from a Block or a Turn), and never builds or reads the
// admission gate keys (connection:<id>, model:<id>:<M>: the gateway's); it
// names only its own rate gates (rpm:<id>, key-tpm:<id>, …) in
// ForConnection and ForClientKey.
package ratelimit
