// Package health keeps what the gateway knows of an upstream's health: per
// connection (Conn) the cooldowns after 429s (per model, with backoff) and
// after rate-limit headers that say the account is spent (the whole
// connection), the suspension after a 401/403 and the circuit breaker; the
// reading of Retry-After and of the providers' rate-limit headers; the
// adaptive learner (Learner), which moves each adaptive gate's effective
// cap by additive increase and multiplicative decrease; and the shadow
// gates (Shadows), which count what a cap would have done without
// enforcing it.
//
// It never admits, queues or sends a request, never sets a cap in
// admission itself (the gateway pushes the caps the Learner reports), never
// builds gate keys (the gateway hands them in), and never reaches another
// replica except through the CapStore it is given.
package health
