package store

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters for new hashes (OWASP's minimum recommendation: 19 MiB, 2 passes).
// Stored hashes carry their own parameters, so these can be raised later.
const (
	argonMemoryKiB = 19 * 1024
	argonTime      = 2
	argonThreads   = 1
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// Bounds on the parameters accepted from a stored hash, so a tampered row cannot make
// a login allocate gigabytes.
const (
	maxArgonMemoryKiB = 256 * 1024
	maxArgonTime      = 16
	maxArgonThreads   = 16
)

// hashGate bounds the password hashes running at once (DESIGN.md, "Gateway rules that
// hold under attack", bounded memory): each argon2id hash allocates argonMemoryKiB
// (19 MiB), so 300 sign-ins at once would hold 5.7 GB. At most slots hashes run; the
// rest wait their turn (or until their request ends). In a burst — a hash finishing
// while others wait for a slot — its memory is handed back to the heap at once (a
// collection before its slot is freed, so the next hash reuses it instead of growing
// the heap by another 19 MiB at GOGC=400), and to the operating system when the last
// hash of the burst is done. A lone hash forces nothing: its 19 MiB are ordinary
// garbage.
type hashGate struct {
	slots   chan struct{}
	pending atomic.Int64 // hashes running or waiting
	running atomic.Int64
	burst   atomic.Bool  // a collection was forced since pending was last 0
	peak    atomic.Int64 // most hashes seen running at once (tests read it)
}

// newHashGate returns a gate for 2 × GOMAXPROCS hashes at once.
func newHashGate() *hashGate {
	return &hashGate{slots: make(chan struct{}, 2*runtime.GOMAXPROCS(0))}
}

// do runs hash when a slot is free, or returns ctx's error when ctx ends first.
func (g *hashGate) do(ctx context.Context, hash func()) error {
	g.pending.Add(1)
	defer func() {
		if g.pending.Add(-1) == 0 && g.burst.CompareAndSwap(true, false) {
			debug.FreeOSMemory()
		}
	}()
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.slots }()
	n := g.running.Add(1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	hash()
	g.running.Add(-1)
	if g.pending.Load() > int64(cap(g.slots)) { // someone waits for this slot
		g.burst.Store(true)
		runtime.GC()
	}
	return nil
}

// hashPassword is hashPassword through the gate.
func (s *Store) hashPassword(ctx context.Context, password string) (string, error) {
	var h string
	err := s.hashes.do(ctx, func() { h = hashPassword(password) })
	return h, err
}

// burnPassword is burnPassword through the gate.
func (s *Store) burnPassword(ctx context.Context, password string) error {
	return s.hashes.do(ctx, func() { burnPassword(password) })
}

// signInEmail reports whether email can name an account at all: valid UTF-8 without
// control characters (a NUL would make Postgres fail the query). Anything else is a
// failed sign-in like an unknown address, never a database error.
func signInEmail(email string) bool {
	if !utf8.ValidString(email) {
		return false
	}
	for _, r := range email {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
}

// hashPassword returns an argon2id hash in PHC string format:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash> (unpadded standard base64).
func hashPassword(password string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version,
		argonMemoryKiB, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// checkPassword reports whether password matches the PHC-format hash encoded. The
// comparison is constant-time.
func checkPassword(encoded, password string) (bool, error) {
	p, salt, want, err := parsePHC(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.time, p.memory, p.threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// burnPassword spends the same work as checking a password against a fresh hash, so a
// login for an unknown email takes about as long as one for a known email.
func burnPassword(password string) {
	var salt [argonSaltLen]byte
	_ = argon2.IDKey([]byte(password), salt[:], argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
}

func parsePHC(encoded string) (argonParams, []byte, []byte, error) {
	var p argonParams
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, hash
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errors.New("store: password hash is not argon2id PHC")
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return p, nil, nil, fmt.Errorf("store: unsupported argon2 version %q", parts[2])
	}
	var threads uint32
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &threads); err != nil {
		return p, nil, nil, fmt.Errorf("store: bad argon2 parameters %q", parts[3])
	}
	if p.memory == 0 || p.memory > maxArgonMemoryKiB || p.time == 0 || p.time > maxArgonTime ||
		threads == 0 || threads > maxArgonThreads {
		return p, nil, nil, fmt.Errorf("store: argon2 parameters out of range %q", parts[3])
	}
	p.threads = uint8(threads)
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return p, nil, nil, errors.New("store: bad argon2 salt")
	}
	key, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errors.New("store: bad argon2 hash")
	}
	return p, salt, key, nil
}
