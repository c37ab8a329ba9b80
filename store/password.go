package store

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

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
