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

// KeyCache is the gateway's view of the client keys: every key by its secret hash in
// memory, each already converted to T (the gateway's own key type, made by the
// function given to NewKeyCache once per load, not per request), so that
// authenticating a request costs one hash and one map read, not a database round
// trip. Disabled keys are held too: the gateway tells them apart (403, not 401). Full loads (Load, at start, on every config notification and
// periodically) replace the set; a secret missing from it is looked up in the database,
// rate-limited, so that a key created a moment ago — by `gatehouse key create` in
// another process, the API or the dashboard — works on the very next request instead of
// only after the notification's reload. It is safe for concurrent use.
type KeyCache[T any] struct {
	st      *Store
	log     *slog.Logger
	now     func() time.Time
	convert func(ClientKey) T

	keys atomic.Pointer[map[[32]byte]cacheEntry[T]]
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
// looked up in the database (rate-limited). convert turns a stored key into what
// Authenticate returns; it runs when a key is loaded. now is the clock of the rate
// limit and of the pause after a database error; nil means time.Now.
func NewKeyCache[T any](st *Store, now func() time.Time, convert func(ClientKey) T) *KeyCache[T] {
	if now == nil {
		now = time.Now
	}
	c := &KeyCache[T]{st: st, log: st.logger, now: now, convert: convert,
		misses: rate.NewLimiter(keyLookupsPerSecond, keyLookupBurst)}
	empty := map[[32]byte]cacheEntry[T]{}
	c.keys.Store(&empty)
	return c
}

// cacheEntry is one key in a KeyCache: the converted key, and whether it has
// authenticated a request since the last FlushUsed.
type cacheEntry[T any] struct {
	key  T
	used *atomic.Bool
}

// markUsed notes a request of e's key. A key in use is already marked, so
// the common case is one shared read, no write.
func (e cacheEntry[T]) markUsed() {
	if !e.used.Load() {
		e.used.Store(true)
	}
}

// Load replaces the set with every client key in the database. On error the set in
// force stays.
func (c *KeyCache[T]) Load(ctx context.Context) error {
	keys, err := c.st.ClientKeysByHash(ctx)
	if err != nil {
		return err
	}
	set := make(map[[32]byte]cacheEntry[T], len(keys))
	for h, k := range keys {
		set[h] = cacheEntry[T]{key: c.convert(k)}
	}
	c.replace(set)
	return nil
}

// replace installs set as the result of a full load: lookups that started before it
// no longer add to the set (the full load is authoritative: the key they found may have
// been deleted since). A key that stays keeps its use mark, so a load between two
// FlushUsed calls loses no use.
func (c *KeyCache[T]) replace(set map[[32]byte]cacheEntry[T]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := *c.keys.Load()
	for h, e := range set {
		if old, ok := cur[h]; ok {
			e.used = old.used
		} else {
			e.used = new(atomic.Bool)
		}
		set[h] = e
	}
	c.keys.Store(&set)
	c.gen++
}

// FlushUsed records now as the last use of every key that authenticated a
// request since the previous call (Authenticate from memory writes nothing to
// the database, so lastUsedAt moves only here, and on a key's first lookup).
// On error the marks are restored, for the next call to try again.
func (c *KeyCache[T]) FlushUsed(ctx context.Context) error {
	var used []*atomic.Bool
	var hashes [][]byte
	for h, e := range *c.keys.Load() {
		if e.used.Swap(false) {
			used = append(used, e.used)
			hashes = append(hashes, h[:])
		}
	}
	if len(hashes) == 0 {
		return nil
	}
	if err := c.st.TouchClientKeys(ctx, hashes); err != nil {
		for _, u := range used {
			u.Store(true)
		}
		return err
	}
	return nil
}

// Authenticate returns the client key whose secret this is, and false for an unknown
// secret: from memory, or, for a secret missing there, from the database
// (rate-limited, bounded by ctx and by keyLookupTimeout, paused for a while after a
// database error), adding it to the set. A disabled key is returned as it is.
func (c *KeyCache[T]) Authenticate(ctx context.Context, secret string) (T, bool) {
	if secret == "" {
		var zero T
		return zero, false
	}
	h := sha256.Sum256([]byte(secret)) // ClientKeyHash, without a slice on the heap
	if e, ok := (*c.keys.Load())[h]; ok {
		e.markUsed()
		return e.key, true
	}
	return c.lookup(ctx, secret, h)
}

// Cached returns the client key of secret from memory only, and false when the set
// does not hold it (Authenticate adds a key it finds in the database). It never reads
// the database.
func (c *KeyCache[T]) Cached(secret string) (T, bool) {
	if secret == "" {
		var zero T
		return zero, false
	}
	e, ok := (*c.keys.Load())[sha256.Sum256([]byte(secret))]
	return e.key, ok
}

// lookup asks the database whether secret is a client key the set does not hold yet,
// and adds it to the set unless a full load replaced the set meanwhile.
func (c *KeyCache[T]) lookup(ctx context.Context, secret string, h [32]byte) (T, bool) {
	var zero T
	now := c.now()
	if now.UnixNano() < c.pausedUntil.Load() || !c.misses.AllowN(now, 1) {
		return zero, false
	}
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	c.lookups.Add(1)
	lctx, cancel := context.WithTimeout(ctx, keyLookupTimeout)
	defer cancel()
	sk, err := c.st.LookupClientKey(lctx, secret)
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
		return zero, false
	}
	k := c.convert(sk)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		cur := *c.keys.Load()
		set := make(map[[32]byte]cacheEntry[T], len(cur)+1)
		for hk, v := range cur {
			set[hk] = v
		}
		// The lookup itself recorded this use (LookupClientKey).
		set[h] = cacheEntry[T]{key: k, used: new(atomic.Bool)}
		c.keys.Store(&set)
	}
	return k, true
}
