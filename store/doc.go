// Package store is Gatehouse's Postgres access layer: provider connections, settings,
// users and their passwords, API tokens, client keys and the client-key cache the gateway
// authenticates from (KeyCache), the audit log, dashboard sessions, the declarative
// config's apply (ApplyConfig), the request log (RequestLog: its writer, partitions,
// queries and the overview's traffic figures), spend (spend_daily, written with the log)
// and the usage counters behind budgets (usage_daily, usage_daily_keys, the money
// reservations of key_spend_reserved), alert deliveries; upstream-secret encryption;
// NOTIFY/LISTEN for configuration changes.
//
// Every method runs against a DB, which a *pgxpool.Pool or a pgx.Tx satisfies, so the same
// code serves both plain calls and calls inside a caller's transaction (InTx). Driver
// errors are translated once, in translate, into the sentinels below; every sign of a
// server going away (a failed connect, SQLSTATE class 57P, a broken socket) is
// ErrUnavailable, which callers answer 503 with Retry-After. It keeps overrides and limits
// as JSON objects and leaves their meaning to its callers (gateway/limits): it imports no
// gateway package beyond leaf types (the request log's row).
//
// # Writes and secrets
//
// A configuration write runs in one transaction that bumps the row's version (a stale
// one is ErrStale), writes an audit row (before and after, never a secret) and sends
// NOTIFY gatehouse_config. GATEHOUSE_SECRET_KEY is the root: HKDF-SHA256 derives one key
// per purpose; upstream keys are sealed with AES-256-GCM, API tokens and client keys are
// stored as SHA-256 only. A secret's preview is its last four characters after one of a
// fixed list of public prefixes (sk-, gh_at_, gh_ck_), empty for a secret shorter
// than 24 characters, computed when the secret is written. Every argon2id hash (19 MiB)
// goes through one gate of 2 × GOMAXPROCS slots, with a collection before a slot is freed
// in a burst: 300 sign-ins at once stay under 250 MB. An e-mail that is not valid UTF-8
// or holds a control character is an unknown account, never sent to Postgres.
//
// # Client keys usable at once
//
// KeyCache authenticates from an in-memory set of key hashes, refreshed by the NOTIFY
// reload; a secret missing from it is looked up in the database (at most 20 a second, 500
// ms each, paused 5 s after a database error; golang.org/x/time/rate), so a key just
// created works on the next request and unknown keys cost at most those lookups. A hit
// only marks the key; the loader writes the marked keys' last_used_at in one UPDATE
// before each reload, so the request path never waits on the database for it.
//
// # The request log
//
// Table requests is range-partitioned by UTC day (primary key (started_at, id), so the key's
// index serves time ranges and the cursor: three indexes per row, not four; id a UUIDv7
// made at flush). Add copies a fixed-size row into a buffer under a mutex and never waits;
// the writer swaps buffers every second (or at 1 000 rows) and writes them with one COPY
// in Postgres's binary format encoded by requestcopy.go into a reused buffer (pgx's
// generic CopyFrom boxed every value: a tenth of the gateway's CPU under load), then the
// spend upserts in the same transaction, so the log and the spend always agree and neither
// counts a dropped row. The commit is synchronous: an asynchronous one saved no CPU and
// could lose rows already counted. Every row added is written or dropped, and
// written + dropped = added.
//
// Faults: partition DDL (today and two days ahead, retention drops) runs hourly on a
// goroutine of its own with lock_timeout 1 s, serialised across replicas by an advisory
// lock, never on the writer's; rows of a day without a partition wait in the batch while
// the others are written. A flush that fails because the database is away keeps its batch
// (up to Buffer rows; new rows beyond are dropped and counted). A refused batch is halved
// until the refused rows are alone, each dropped, counted and logged. A flush that fails
// without knowing whether it committed marks the batch ambiguous; its retry goes through a
// staging table with ON CONFLICT DO NOTHING and sums spend over the rows actually
// inserted, so nothing is written or counted twice. The spend sums of a flush reuse their
// map and slice (no allocation per row once a key was seen).
//
// # Counts that cannot overflow
//
// Every add in SQL is satSum (numeric, held within [0, 2⁶³−1]) and every conditional
// reservation compares in numeric; the columns stay bigint. Day and month money rows are
// locked day first, month second in every statement, so reservations and settlements never
// deadlock. Reservations are conditional upserts that return no row past their budget.
//
// # Config apply
//
// ApplyConfig locks the settings row and every connection and client key row, hands them
// to the caller's validator (so create-or-update is decided on the locked state), writes
// only what differs — one audit row per entity, one NOTIFY — in one transaction; a dry run
// takes the same path and rolls back. A connection's key is compared with the decrypted
// stored key, settings by the view in force, so an export applied back changes nothing.
package store
