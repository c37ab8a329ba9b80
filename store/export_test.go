package store

import (
	"context"
	"time"
)

// Test hooks for the external tests (package store_test).

// Lookups returns how many database lookups c has made.
func (c *KeyCache[T]) Lookups() int64 { return c.lookups.Load() }

// SetAfterLookup makes f run between each lookup's query and its update of the set.
func (c *KeyCache[T]) SetAfterLookup(f func()) { c.afterLookup = f }

// KeyLookupBurst and KeyLookupPause are the lookup limits.
const (
	KeyLookupBurst      = keyLookupBurst
	KeyLookupsPerSecond = keyLookupsPerSecond
	KeyLookupPause      = keyLookupPause
)

// MigrateFS applies the migrations in fsys (tests bring a database to an older schema).
var MigrateFS = migrate

// EnsureRequestPartitions makes the request log's partitions of the UTC days first to last.
func (s *Store) EnsureRequestPartitions(ctx context.Context, first, last time.Time) error {
	return s.ensureRequestPartitions(ctx, first, last)
}

// PasswordHashPeak returns the most password hashes s has seen running at once.
func (s *Store) PasswordHashPeak() int64 { return s.hashes.peak.Load() }

// FlushNow runs one flush of the writer's loop on the calling goroutine (the log
// must not be running).
func (l *RequestLog) FlushNow(ctx context.Context) { l.flush(ctx) }

// SetMaintainRetry sets how soon the log's failed partition maintenance is tried again.
func (l *RequestLog) SetMaintainRetry(d time.Duration) { l.maintainRetry = d }

// SetAmbiguous marks the rows the log holds as possibly committed already, as a
// flush that failed without an answer to its commit does.
func (l *RequestLog) SetAmbiguous() { l.ambiguous = true }
