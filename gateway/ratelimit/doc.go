// Package ratelimit keeps the rate limits and budgets of connections and client keys: the
// rpm/minTime dispatch spacing (a Turn per request, waited for while the request holds its
// permit, and given back when no dispatch follows), the tpm minute window with its debt and
// running estimate, the rpd/tpd day counts through a UsageCounter, and the Reservation
// that holds a request's estimated tokens and money against every budget before dispatch
// and settles them with its real usage (memory as cache and as fallback, fail-open).
// State is the in-process state of one connection or key, carried over config snapshots
// by the caller; Local and Shared are the two ways of keeping the spacing and the tpm
// window, chosen once at wiring time: in this process, or in a Store every replica sees
// (cluster mode: gateway/cluster's *Limits over Redis), with the in-process state
// alongside and in charge while the store fails. Shared also carries what the same store
// keeps of an upstream's health (cooldowns, suspensions, learned caps), since one View
// reads it all.
//
// It never admits or queues a request (that is admission), never decides where a request
// goes, never builds the rejection a client sees (the gateway words it from a Block or a
// Turn), and never builds or reads the admission gate keys (connection:<id>,
// model:<id>:<M>: the gateway's); it names only its own rate gates (rpm:<id>,
// key-tpm:<id>, …) in ForConnection and ForClientKey.
//
// # Spacing and turns
//
// rpm and minTime are one spacing, the stricter of 60000/rpm ms and minTime, with no burst
// after idle time. The spacer is its own (the next free turn under a mutex) rather than a
// rate.Limiter, whose Cancel cannot return a turn whose time has come: Turn.GiveBack moves
// the next turn back to the turn's start only while no later turn was taken, so a turn is
// never granted twice, and a key that loses a dispatch (a later skip, a too-late
// connection turn, a client that left) does not lose a minute's request. The shared store
// gives turns back the same way (TurnReturner). A key's turn comes before any gate, so a
// key pacing itself holds no slot while it waits; the admission waits and turns of every
// candidate share one maxWaitMs deadline. The spacing runs on the real clock; days and
// minute windows follow the injected clock.
//
// # Day counts and the tpm window
//
// rpd and tpd count per UTC day in Postgres (usage_daily, usage_daily_keys), one
// conditional upsert per dispatch or reservation, so they are exact across restarts and
// replicas; memory keeps a cache of the day to skip spent connections, refilled on every
// config load. tpm is a minute window: an empty window always takes one request, usage
// beyond the limit is debt paid off at tpm per minute, and the running estimate of tokens
// per request keeps a connection out before it would overrun. When the usage store errors
// the day counts are kept and enforced in memory (failOpen: the store is not asked again
// for 5 s, one warning a minute), and what was counted is written into its own day's row
// at the next good call; a database blip must not stop traffic the budgets allow. In
// cluster mode (FailClosed) rpd, tpd and money budgets answer unavailable instead, unless
// GATEHOUSE_BUDGET_FAIL=open.
//
// # Reservations
//
// A Reservation takes, all or nothing, the key's tpm and tpd, its money budgets
// (budgetUsdDaily, budgetUsdMonthly: day and month rows in key_spend_reserved) and the
// connection's tpm and tpd, so parallel requests cannot overrun a budget that has room for
// one (the session's budget is package session's guard, reserved beside it). The estimate is the body's length ÷ 4 plus 1 600 tokens per
// media part, plus the output bound times the number of choices (defaultOutputReserve
// without one), capped at maxOutputReserve; its cost is the target's price for it. An
// estimate larger than a whole day or money budget is refused without touching the store
// (TooLarge); the tpm window is left out of that rule on purpose. Settle runs exactly once:
// usage reported with a complete answer replaces each hold (the difference may be
// negative), an error status or nothing dispatched gives it all back, and an unknown
// outcome (a hang-up, a broken stream, no usage) keeps the key's whole hold charged — a
// budget is never undercharged — while a connection is charged only the input estimate
// plus the output relayed, so one tenant's abandoned request never takes a shared
// connection from others. Store calls run with context.WithoutCancel: a statement cut by a
// client leaving may still have run, and only its answer says what to give back. A hold
// settled on a later UTC day corrects its own day's row. Every sum saturates (SatAdd,
// SatMul), as the store's SQL does.
package ratelimit
