package httpkit

import (
	lru "container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Sign-in throttling, in memory (per process: behind several replicas each counts
// on its own, which only makes the limits looser by the replica count).
//
// Failures are counted per key in a window that closes throttleForget after the key's
// last failure. Three keys are charged on every attempt, with the client address of
// clientAddr (GATEHOUSE_TRUSTED_PROXIES):
//
//   - account and address together: 5 free failures, then each further attempt must
//     wait a delay that doubles with every failure (30 s, 1 min, 2 min, …, 15 min) —
//     the guesser at one account from one place. Answered 429 with Retry-After.
//   - address: 20 free failures whatever the accounts, then the same growing wait —
//     one place spraying many accounts. Answered 429.
//   - account, from every address: 10 free failures, then the password is checked
//     only after a delay that doubles from 250 ms up to AccountMaxDelay (2 s). Never a
//     429: a stranger can drive this key for someone else's account, so it may only
//     slow the owner down, never refuse the right password. The owner signing in from
//     their own address meets none of the stranger's pair or address keys.
//
// A failure is charged before the password is checked, under the same lock as the
// check, so N parallel guesses are N failures and at most the free allowance gets to
// the (slow) password hash; the rest are answered 429. A right password refunds the
// address's charge and clears the pair and account keys (a guesser cannot reset an
// address's count by signing in to an account of their own). An attempt answered 429
// is not charged, so nothing stretches a wait beyond its cap, and every key is
// forgotten throttleForget after its last failure: there is no permanent lockout.
//
// The table holds at most throttleMaxEntries keys; a new key past that drops the key
// touched longest ago. Keys are SHA-256 digests salted per process, so the table
// holds no email address or client address.
const (
	throttleForget     = 15 * time.Minute
	throttleBaseDelay  = 30 * time.Second
	throttleMaxEntries = 10000
	accountBaseDelay   = 250 * time.Millisecond
	AccountMaxDelay    = 2 * time.Second
)

// throttlePolicy is how many failures a key may make before it waits, and the
// shortest and longest wait.
type throttlePolicy struct {
	Free     int
	base     time.Duration
	maxDelay time.Duration
}

var (
	PolicyPair    = throttlePolicy{Free: 5, base: throttleBaseDelay, maxDelay: 15 * time.Minute}
	PolicyAddress = throttlePolicy{Free: 20, base: throttleBaseDelay, maxDelay: 15 * time.Minute}
	policyAccount = throttlePolicy{Free: 10, base: accountBaseDelay, maxDelay: AccountMaxDelay}
)

// delay is how long a key with failures waits past its last one (0 = free).
func (p throttlePolicy) delay(failures int) time.Duration {
	over := failures - p.Free
	if over < 0 {
		return 0
	}
	if over >= 16 {
		return p.maxDelay
	}
	return min(p.base<<over, p.maxDelay)
}

// throttleKey is a salted digest of one key: the table never holds who or where.
type throttleKey [16]byte

type throttleEntry struct {
	key      throttleKey
	failures int
	last     time.Time
}

// loginKeys are the three keys of one attempt.
type loginKeys struct {
	pair, addr, acct throttleKey
}

// LoginThrottle counts sign-in failures per key.
type LoginThrottle struct {
	now func() time.Time
	// Sleep waits out the account key's delay; tests replace it to count delays
	// against their own clock instead of waiting.
	Sleep func(ctx context.Context, d time.Duration) error
	salt  [32]byte
	max   int

	mu      sync.Mutex
	entries map[throttleKey]*lru.Element // of *throttleEntry
	order   *lru.List                    // least recently touched first
	// size is len(entries), readable without mu: an empty table answers
	// "no wait" without hashing a key (the bearer throttle asks on every request).
	size atomic.Int64
}

func NewLoginThrottle(now func() time.Time) *LoginThrottle {
	t := &LoginThrottle{
		now: now, Sleep: sleepCtx, max: throttleMaxEntries,
		entries: map[throttleKey]*lru.Element{}, order: lru.New(),
	}
	_, _ = rand.Read(t.salt[:]) // crypto/rand.Read never fails (Go 1.24+)
	return t
}

// sleepCtx waits d, or less when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keys returns the keys an attempt to sign in as email from addr counts against.
func (t *LoginThrottle) Keys(email, addr string) loginKeys {
	acct := strings.ToLower(strings.TrimSpace(email))
	return loginKeys{
		pair: t.digest("pair", acct, addr),
		addr: t.digest("addr", addr),
		acct: t.digest("acct", acct),
	}
}

func (t *LoginThrottle) digest(parts ...string) throttleKey {
	h := sha256.New()
	h.Write(t.salt[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var k throttleKey
	copy(k[:], h.Sum(nil))
	return k
}

// begin decides an attempt before its password is checked. When the pair or the
// address key must still wait, it returns that wait as retry and charges nothing.
// Otherwise it charges one failure to each key and returns how long the password
// check must be delayed (the account key's slow-down, at most AccountMaxDelay).
func (t *LoginThrottle) Begin(k loginKeys) (retry, delay time.Duration) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	pair, addr, acct := t.get(k.pair, now), t.get(k.addr, now), t.get(k.acct, now)
	for _, c := range []struct {
		e *throttleEntry
		p throttlePolicy
	}{{pair, PolicyPair}, {addr, PolicyAddress}} {
		if c.e == nil {
			continue
		}
		if d := c.p.delay(c.e.failures); d > 0 {
			if until := c.e.last.Add(d); until.After(now) {
				retry = max(retry, until.Sub(now))
			}
		}
	}
	if retry > 0 {
		return retry, 0
	}
	if acct != nil {
		delay = policyAccount.delay(acct.failures)
	}
	for _, key := range []throttleKey{k.pair, k.addr, k.acct} {
		e := t.touch(key, now)
		e.failures++
		e.last = now
	}
	return 0, delay
}

// wait returns how long key must still wait under p before its next attempt is
// checked (0: now). It charges nothing.
func (t *LoginThrottle) wait(key throttleKey, p throttlePolicy) time.Duration {
	if t.size.Load() == 0 {
		return 0
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.get(key, now)
	if e == nil {
		return 0
	}
	if d := p.delay(e.failures); d > 0 {
		if until := e.last.Add(d); until.After(now) {
			return until.Sub(now)
		}
	}
	return 0
}

// fail charges one failure to key.
func (t *LoginThrottle) fail(key throttleKey) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.touch(key, now)
	e.failures++
	e.last = now
}

// succeeded records that the attempt begun for k had the right password.
func (t *LoginThrottle) Succeeded(k loginKeys) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remove(k.pair)
	t.remove(k.acct)
	t.uncharge(k.addr)
}

// refund takes back the charges of an attempt that was not decided (the store failed).
func (t *LoginThrottle) Refund(k loginKeys) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, key := range []throttleKey{k.pair, k.addr, k.acct} {
		t.uncharge(key)
	}
}

// get returns key's entry, or nil when it has none or has forgotten it; t.mu is held.
func (t *LoginThrottle) get(key throttleKey, now time.Time) *throttleEntry {
	el, ok := t.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*throttleEntry)
	if now.Sub(e.last) >= throttleForget {
		t.remove(key)
		return nil
	}
	return e
}

// touch returns key's entry (a new one if needed) as the most recently touched,
// dropping the least recently touched entry when the table is full; t.mu is held.
func (t *LoginThrottle) touch(key throttleKey, now time.Time) *throttleEntry {
	if e := t.get(key, now); e != nil {
		t.order.MoveToBack(t.entries[key])
		return e
	}
	for t.order.Len() >= t.max {
		oldest := t.order.Front()
		t.order.Remove(oldest)
		delete(t.entries, oldest.Value.(*throttleEntry).key)
	}
	e := &throttleEntry{key: key}
	t.entries[key] = t.order.PushBack(e)
	t.size.Store(int64(len(t.entries)))
	return e
}

// uncharge takes one failure back from key; t.mu is held.
func (t *LoginThrottle) uncharge(key throttleKey) {
	el, ok := t.entries[key]
	if !ok {
		return
	}
	e := el.Value.(*throttleEntry)
	if e.failures--; e.failures <= 0 {
		t.remove(key)
	}
}

// remove forgets key; t.mu is held.
func (t *LoginThrottle) remove(key throttleKey) {
	if el, ok := t.entries[key]; ok {
		t.order.Remove(el)
		delete(t.entries, key)
		t.size.Store(int64(len(t.entries)))
	}
}

// len is how many keys the table holds.
func (t *LoginThrottle) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
