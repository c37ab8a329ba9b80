//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// testClock is a clock that moves only when told: the key cache's rate limit and
// pause are then counted, not timed.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// sameKey keeps the store's own key type in the cache under test.
func sameKey(k store.ClientKey) store.ClientKey { return k }

// authenticated reports whether c accepts secret.
func authenticated(c *store.KeyCache[store.ClientKey], ctx context.Context, secret string) bool {
	_, ok := c.Authenticate(ctx, secret)
	return ok
}

// cachedName is the name of the key c holds in memory for secret, "" for none.
func cachedName(c *store.KeyCache[store.ClientKey], secret string) string {
	k, _ := c.Cached(secret)
	return k.Name
}

// wantLookups fails the test unless c has made n database lookups.
func wantLookups(t *testing.T, c *store.KeyCache[store.ClientKey], n int64, when string) {
	t.Helper()
	if got := c.Lookups(); got != n {
		t.Fatalf("%s: %d database lookups, want %d", when, got, n)
	}
}

// TestKeyCacheHitFromMemory: after a full load, a known key authenticates from memory
// (no database lookup) and has its name; an empty secret is refused without one.
func TestKeyCacheHitFromMemory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	_, secret := mustCreateClientKey(t, s, "agent")
	c := store.NewKeyCache(s, newTestClock().now, sameKey)
	if err := c.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	for range 3 {
		if !authenticated(c, ctx, secret) {
			t.Fatal("Authenticate(loaded key) = false, want true")
		}
	}
	if authenticated(c, ctx, "") {
		t.Fatal(`Authenticate("") = true, want false`)
	}
	if got := cachedName(c, secret); got != "agent" {
		t.Errorf("Name(loaded key) = %q, want agent", got)
	}
	if got := cachedName(c, "gh_ck_not-a-key-0123456789"); got != "" {
		t.Errorf("Name(unknown key) = %q, want none", got)
	}
	wantLookups(t, c, 0, "after known keys and an empty one")
}

// TestKeyCacheMissLookedUpAndAdded: a key created after the last full load is looked up
// in the database once and then served from memory; an unknown key is looked up and
// refused.
func TestKeyCacheMissLookedUpAndAdded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	c := store.NewKeyCache(s, newTestClock().now, sameKey)
	if err := c.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	_, secret := mustCreateClientKey(t, s, "fresh")
	if !authenticated(c, ctx, secret) {
		t.Fatal("Authenticate(new key) = false before any reload, want true")
	}
	wantLookups(t, c, 1, "after the new key's first request")
	if !authenticated(c, ctx, secret) {
		t.Fatal("Authenticate(new key) = false on the second request, want true")
	}
	wantLookups(t, c, 1, "after the new key's second request (served from memory)")
	if got := cachedName(c, secret); got != "fresh" {
		t.Errorf("Cached(looked-up key) = %q, want fresh", got)
	}
	if authenticated(c, ctx, "gh_ck_not-a-key-0123456789") {
		t.Fatal("Authenticate(unknown key) = true, want false")
	}
	wantLookups(t, c, 2, "after an unknown key")
}

// TestKeyCacheLookupsRateLimited: secrets missing from memory are looked up at most
// burst at once and then at the refill rate; keys in memory are unaffected.
func TestKeyCacheLookupsRateLimited(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	_, known := mustCreateClientKey(t, s, "known")
	clock := newTestClock()
	c := store.NewKeyCache(s, clock.now, sameKey)
	if err := c.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	for i := range 3 * store.KeyLookupBurst {
		if authenticated(c, ctx, fmt.Sprintf("gh_ck_unknown-%03d", i)) {
			t.Fatalf("unknown key %d authenticated", i)
		}
	}
	wantLookups(t, c, store.KeyLookupBurst, "after a burst of unknown keys")

	// Out of lookups: a key created meanwhile is refused until the limiter refills,
	// while a key in memory still authenticates.
	_, fresh := mustCreateClientKey(t, s, "fresh")
	if authenticated(c, ctx, fresh) {
		t.Fatal("Authenticate(new key) = true with no lookups left, want false (rate-limited)")
	}
	if !authenticated(c, ctx, known) {
		t.Fatal("Authenticate(key in memory) = false while lookups are rate-limited")
	}
	wantLookups(t, c, store.KeyLookupBurst, "while rate-limited")

	// A quarter of a second refills a quarter of the rate.
	clock.advance(time.Second / 4)
	refill := int64(store.KeyLookupsPerSecond / 4)
	if !authenticated(c, ctx, fresh) {
		t.Fatal("Authenticate(new key) = false after the limiter refilled, want true")
	}
	for i := range 3 * refill {
		authenticated(c, ctx, fmt.Sprintf("gh_ck_unknown-again-%03d", i))
	}
	wantLookups(t, c, store.KeyLookupBurst+refill, "after the refill")
}

// TestKeyCacheFullLoadWinsOverRacingLookup: a full load that replaces the set while a
// lookup is under way is authoritative: the key the lookup found (deleted since) is not
// added to the new set.
func TestKeyCacheFullLoadWinsOverRacingLookup(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	k, secret := mustCreateClientKey(t, s, "doomed")
	c := store.NewKeyCache(s, newTestClock().now, sameKey)
	var once sync.Once
	c.SetAfterLookup(func() {
		// Between the lookup's query and its update of the set: the key is deleted
		// and a full load (as a NOTIFY's reload would) replaces the set.
		once.Do(func() {
			if err := s.DeleteClientKey(ctx, store.ActorSystem, k.ID, 0); err != nil {
				t.Errorf("DeleteClientKey: %v", err)
			}
			if err := c.Load(ctx); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	})
	if !authenticated(c, ctx, secret) {
		t.Fatal("Authenticate = false, want true: the key existed when it was looked up")
	}
	wantLookups(t, c, 1, "after the racing lookup")
	if authenticated(c, ctx, secret) {
		t.Fatal("Authenticate(deleted key) = true after the full load, want false")
	}
	// Not from memory: the lookup's result did not survive the full load.
	wantLookups(t, c, 2, "after the deleted key's next request")
}

// TestKeyCacheDatabaseErrorPausesLookups: a lookup that fails for want of a database
// stops lookups for the pause (keys in memory keep working), then they resume; a lookup
// cut short by its own request's end pauses nothing.
func TestKeyCacheDatabaseErrorPausesLookups(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := storetest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := store.New(pool, testSecretKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, known := mustCreateClientKey(t, s, "known")
	clock := newTestClock()
	c := store.NewKeyCache(s, clock.now, sameKey)
	if err := c.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	pool.Close() // the database is gone for this store

	gone, cancel := context.WithCancel(ctx)
	cancel()
	if authenticated(c, gone, "gh_ck_unknown-000") {
		t.Fatal("unknown key authenticated")
	}
	wantLookups(t, c, 1, "after a lookup for a request that had ended")

	if authenticated(c, ctx, "gh_ck_unknown-001") {
		t.Fatal("unknown key authenticated")
	}
	wantLookups(t, c, 2, "after the failed lookup (an ended request pauses nothing)")
	for i := range 5 {
		authenticated(c, ctx, fmt.Sprintf("gh_ck_unknown-1%02d", i))
	}
	wantLookups(t, c, 2, "during the pause")
	if !authenticated(c, ctx, known) {
		t.Fatal("Authenticate(key in memory) = false during the pause")
	}

	clock.advance(store.KeyLookupPause - time.Millisecond)
	authenticated(c, ctx, "gh_ck_unknown-002")
	wantLookups(t, c, 2, "just before the pause ends")
	clock.advance(time.Millisecond)
	authenticated(c, ctx, "gh_ck_unknown-003")
	wantLookups(t, c, 3, "once the pause is over")
}

// lastUsed is the stored lastUsedAt of key id (nil: never used).
func lastUsed(t *testing.T, s *store.Store, id string) *time.Time {
	t.Helper()
	k, err := s.GetClientKey(t.Context(), id)
	if err != nil {
		t.Fatalf("GetClientKey(%s): %v", id, err)
	}
	return k.LastUsedAt
}

// TestKeyCacheFlushUsedRecordsLastUse: requests served from memory write nothing, and
// FlushUsed records the last use of exactly the keys that authenticated since the
// previous flush — across a full load in between, and again after a flush that failed.
func TestKeyCacheFlushUsedRecordsLastUse(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	used, secret := mustCreateClientKey(t, s, "used")
	idle, _ := mustCreateClientKey(t, s, "idle")
	c := store.NewKeyCache(s, newTestClock().now, sameKey)
	if err := c.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	for range 3 {
		if !authenticated(c, ctx, secret) {
			t.Fatal("Authenticate(loaded key) = false, want true")
		}
	}
	if got := lastUsed(t, s, used.ID); got != nil {
		t.Fatalf("lastUsedAt before any flush = %v, want none (memory hits write nothing)", got)
	}
	if err := c.FlushUsed(ctx); err != nil {
		t.Fatalf("FlushUsed: %v", err)
	}
	first := lastUsed(t, s, used.ID)
	if first == nil {
		t.Fatal("lastUsedAt after a flush = none, want the flush's time")
	}
	if got := lastUsed(t, s, idle.ID); got != nil {
		t.Errorf("lastUsedAt of a key with no request = %v, want none", got)
	}

	// No request since: nothing to write.
	if err := c.FlushUsed(ctx); err != nil {
		t.Fatalf("FlushUsed: %v", err)
	}
	if got := lastUsed(t, s, used.ID); !got.Equal(*first) {
		t.Errorf("lastUsedAt after a flush with no use = %v, want it unchanged at %v", got, first)
	}

	// A use, then a full load, then a flush: the mark survives the load.
	if !authenticated(c, ctx, secret) {
		t.Fatal("Authenticate = false, want true")
	}
	if err := c.Load(ctx); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if err := c.FlushUsed(ctx); err != nil {
		t.Fatalf("FlushUsed: %v", err)
	}
	second := lastUsed(t, s, used.ID)
	if !second.After(*first) {
		t.Fatalf("lastUsedAt after a use across a load = %v, want later than %v", second, first)
	}

	// A flush that fails keeps the mark for the next one.
	if !authenticated(c, ctx, secret) {
		t.Fatal("Authenticate = false, want true")
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.FlushUsed(done); err == nil {
		t.Fatal("FlushUsed with a cancelled context = nil, want an error")
	}
	if got := lastUsed(t, s, used.ID); !got.Equal(*second) {
		t.Fatalf("lastUsedAt after a failed flush = %v, want it unchanged at %v", got, second)
	}
	if err := c.FlushUsed(ctx); err != nil {
		t.Fatalf("FlushUsed: %v", err)
	}
	if got := lastUsed(t, s, used.ID); !got.After(*second) {
		t.Errorf("lastUsedAt after the retry = %v, want later than %v", got, second)
	}
}
