package handlers

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Sign-in throttling, in memory (per process: behind several replicas each counts
// on its own, which only makes the limits looser by the replica count).
//
// Failures are counted per key in a window that closes throttleForget after the key's
// last failure. Past a key's free failures, each further attempt must wait a delay
// that doubles with every failure (30 s, 1 min, 2 min, …) up to the key's cap.
// Three keys are checked on every attempt:
//
//   - account and address together: 5 free failures, delay capped at 15 min — the
//     guesser at one account from one place;
//   - address: 20 free failures, capped at 15 min — one place spraying many accounts;
//   - account: 10 free failures, capped at 1 min — many places guessing one account.
//     A stranger can trigger this one for someone else's account, so it only ever
//     slows the owner down to one attempt a minute; it never locks them out.
//
// An attempt made while a key is throttled is answered 429 without checking the
// password and is not counted, so nothing stretches a wait beyond its cap, and every
// key is forgotten throttleForget after its last failure. A successful sign-in clears
// the account's keys (not the address's: a guesser cannot reset the count by
// signing in to an account of their own).
const (
	throttleForget    = 15 * time.Minute
	throttleBaseDelay = 30 * time.Second
	// throttleMaxKeys bounds the table; past it, forgotten keys are swept.
	throttleMaxKeys = 10000
)

// throttlePolicy is how many failures a key may make before it waits, and the
// longest wait.
type throttlePolicy struct {
	free     int
	maxDelay time.Duration
}

var (
	policyPair    = throttlePolicy{free: 5, maxDelay: 15 * time.Minute}
	policyAddress = throttlePolicy{free: 20, maxDelay: 15 * time.Minute}
	policyAccount = throttlePolicy{free: 10, maxDelay: time.Minute}
)

type throttleEntry struct {
	failures int
	last     time.Time
	policy   throttlePolicy
}

// until is when the key may try again; the zero time when it may now.
func (e *throttleEntry) until() time.Time {
	over := e.failures - e.policy.free
	if over < 0 {
		return time.Time{}
	}
	d := e.policy.maxDelay
	if over < 16 {
		d = min(throttleBaseDelay<<over, e.policy.maxDelay)
	}
	return e.last.Add(d)
}

// loginThrottle counts sign-in failures per key.
type loginThrottle struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[string]*throttleEntry
}

func newLoginThrottle(now func() time.Time) *loginThrottle {
	return &loginThrottle{now: now, entries: map[string]*throttleEntry{}}
}

// throttleKey is one key of one attempt with its policy.
type throttleKey struct {
	key    string
	policy throttlePolicy
}

// attemptKeys returns the keys an attempt to sign in as email from r counts against.
func attemptKeys(email string, r *http.Request) []throttleKey {
	acct := strings.ToLower(strings.TrimSpace(email))
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	return []throttleKey{
		{"pair\x00" + acct + "\x00" + addr, policyPair},
		{"addr\x00" + addr, policyAddress},
		{"acct\x00" + acct, policyAccount},
	}
}

// wait reports how long the attempt must still wait (0 = go ahead).
func (t *loginThrottle) wait(keys []throttleKey) time.Duration {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	var longest time.Duration
	for _, k := range keys {
		e, ok := t.entries[k.key]
		if !ok {
			continue
		}
		if now.Sub(e.last) >= throttleForget {
			delete(t.entries, k.key)
			continue
		}
		if u := e.until(); u.After(now) {
			longest = max(longest, u.Sub(now))
		}
	}
	return longest
}

// fail counts a failed attempt against every key.
func (t *loginThrottle) fail(keys []throttleKey) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.entries) >= throttleMaxKeys {
		t.sweep(now)
	}
	for _, k := range keys {
		e, ok := t.entries[k.key]
		if !ok || now.Sub(e.last) >= throttleForget {
			e = &throttleEntry{policy: k.policy}
			t.entries[k.key] = e
		}
		e.failures++
		e.last = now
	}
}

// succeed clears the account's keys after a good sign-in.
func (t *loginThrottle) succeed(keys []throttleKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		if !strings.HasPrefix(k.key, "addr\x00") {
			delete(t.entries, k.key)
		}
	}
}

// sweep drops forgotten keys; t.mu is held.
func (t *loginThrottle) sweep(now time.Time) {
	for k, e := range t.entries {
		if now.Sub(e.last) >= throttleForget {
			delete(t.entries, k)
		}
	}
}
