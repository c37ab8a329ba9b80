package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

const (
	// keyLookupsPerSecond and keyLookupBurst bound the database lookups of client keys
	// missing from a KeyCache, so that unknown keys cannot load the database.
	keyLookupsPerSecond = 20
	keyLookupBurst      = 20
	// keyLookupTimeout bounds one lookup: a client with an unknown key gets its 401
	// quickly even while the database is slow.
	keyLookupTimeout = 500 * time.Millisecond
	// keyLookupPause is how long lookups stop after a database error.
	keyLookupPause = 5 * time.Second
)

// KeyCache is the gateway's view of the client keys: the set of their secret hashes in
// memory, so that authenticating a request costs one hash and one map read, not a
// database round trip. Full loads (Load, at start, on every config notification and
// periodically) replace the set; a secret missing from it is looked up in the database,
// rate-limited, so that a key created a moment ago — by `gatehouse key create` in
// another process, the API or the dashboard — works on the very next request instead of
// only after the notification's reload. It is safe for concurrent use.
type KeyCache struct {
	st  *Store
	log *slog.Logger
	now func() time.Time

	keys atomic.Pointer[map[[32]byte]string] // secret hash → key name
	// misses rate-limits the lookups of secrets missing from keys.
	misses *rate.Limiter
	// pausedUntil (unix nanos) skips lookups for a while after a database error.
	pausedUntil atomic.Int64
	// lookups counts the database lookups made (for tests, through export_test.go).
	lookups atomic.Int64
	// afterLookup, when set (by tests), runs between a lookup's query and its
	// update of the set.
	afterLookup func()

	mu  sync.Mutex // serialises swaps of keys and gen
	gen uint64     // bumped by every full load of the set
}

// NewKeyCache returns an empty cache over st: until the first Load every secret is
// looked up in the database (rate-limited). now is the clock of the rate limit and of
// the pause after a database error; nil means time.Now.
func NewKeyCache(st *Store, now func() time.Time) *KeyCache {
	if now == nil {
		now = time.Now
	}
	c := &KeyCache{st: st, log: st.logger, now: now,
		misses: rate.NewLimiter(keyLookupsPerSecond, keyLookupBurst)}
	empty := map[[32]byte]string{}
	c.keys.Store(&empty)
	return c
}

// Load replaces the set with every client key in the database. On error the set in
// force stays.
func (c *KeyCache) Load(ctx context.Context) error {
	set, err := c.st.ClientKeyHashes(ctx)
	if err != nil {
		return err
	}
	c.replace(set)
	return nil
}

// replace installs set as the result of a full load: lookups that started before it
// no longer add to the set (the full load is authoritative: the key they found may have
// been deleted since).
func (c *KeyCache) replace(set map[[32]byte]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys.Store(&set)
	c.gen++
}

// Authenticate reports whether secret is a known client key: from memory, or, for a
// secret missing there, from the database (rate-limited, bounded by ctx and by
// keyLookupTimeout, paused for a while after a database error), adding it to the set.
func (c *KeyCache) Authenticate(ctx context.Context, secret string) bool {
	if secret == "" {
		return false
	}
	h := sha256.Sum256([]byte(secret)) // ClientKeyHash, without a slice on the heap
	if _, ok := (*c.keys.Load())[h]; ok {
		return true
	}
	return c.lookup(ctx, secret, h)
}

// Name returns the name of the client key secret, "" when the set does not hold it
// (Authenticate adds a key it finds in the database). It labels the gateway's traces
// (gatehouse.client) and never reads the database.
func (c *KeyCache) Name(secret string) string {
	if secret == "" {
		return ""
	}
	return (*c.keys.Load())[sha256.Sum256([]byte(secret))]
}

// lookup asks the database whether secret is a client key the set does not hold yet,
// and adds it to the set unless a full load replaced the set meanwhile.
func (c *KeyCache) lookup(ctx context.Context, secret string, h [32]byte) bool {
	now := c.now()
	if now.UnixNano() < c.pausedUntil.Load() || !c.misses.AllowN(now, 1) {
		return false
	}
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	c.lookups.Add(1)
	lctx, cancel := context.WithTimeout(ctx, keyLookupTimeout)
	defer cancel()
	k, err := c.st.LookupClientKey(lctx, secret)
	if c.afterLookup != nil {
		c.afterLookup()
	}
	if err != nil {
		// A client that went away says nothing about the database.
		if !errors.Is(err, ErrNotFound) && ctx.Err() == nil {
			c.pausedUntil.Store(c.now().Add(keyLookupPause).UnixNano())
			c.log.Warn("look up a client key missing from memory; pausing lookups",
				slog.Duration("pause", keyLookupPause), slog.Any("error", err))
		}
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		cur := *c.keys.Load()
		set := make(map[[32]byte]string, len(cur)+1)
		for hk, name := range cur {
			set[hk] = name
		}
		set[h] = k.Name
		c.keys.Store(&set)
	}
	return true
}
