package store

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SecretKeySize is the length in bytes of GATEHOUSE_SECRET_KEY once decoded.
const SecretKeySize = 32

// PurposeUpstreamSecret is the HKDF info string for the key that seals upstream API keys.
const PurposeUpstreamSecret = "gatehouse upstream-secret v1"

// ParseSecretKey decodes a secret key given as 64 hex characters or as standard or
// URL-safe base64 (padded or not) of exactly 32 bytes. Surrounding whitespace is ignored.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("store: secret key is empty: want 32 bytes as 64 hex characters or base64")
	}
	if len(s) == 2*SecretKeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
	} {
		b, err := enc.DecodeString(s)
		if err != nil {
			continue
		}
		if len(b) != SecretKeySize {
			return nil, fmt.Errorf("store: secret key decodes to %d bytes, want %d", len(b), SecretKeySize)
		}
		return b, nil
	}
	return nil, fmt.Errorf("store: secret key is neither 64 hex characters nor base64 of %d bytes (got %d characters)",
		SecretKeySize, len(s))
}

// GenerateSecretKey returns a new random secret key as 64 hex characters.
func GenerateSecretKey() string {
	b := make([]byte, SecretKeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b)
}

// DeriveKey derives an n-byte key for purpose from the secret key with HKDF-SHA256.
// Each use gets its own purpose string, so keys for different uses are independent.
// It panics if n is outside 1..8160 (255 SHA-256 blocks), a programming error.
func DeriveKey(secret []byte, purpose string, n int) []byte {
	k, err := hkdf.Key(sha256.New, secret, nil, purpose, n)
	if err != nil {
		panic(fmt.Sprintf("store: derive key: %v", err))
	}
	return k
}

func newSealer(secretKey []byte) (cipher.AEAD, error) {
	if len(secretKey) != SecretKeySize {
		return nil, fmt.Errorf("store: secret key is %d bytes, want %d", len(secretKey), SecretKeySize)
	}
	block, err := aes.NewCipher(DeriveKey(secretKey, PurposeUpstreamSecret, 32))
	if err != nil {
		return nil, fmt.Errorf("store: new cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("store: new gcm: %w", err)
	}
	return aead, nil
}

// sealAAD binds ciphertexts to their column, so a value copied into another encrypted
// column would not decrypt.
const sealAAD = "provider_connections.api_key_enc"

// seal encrypts plaintext as nonce || ciphertext+tag.
func (s *Store) seal(plaintext string) []byte {
	nonce := make([]byte, s.sealer.NonceSize(), s.sealer.NonceSize()+len(plaintext)+s.sealer.Overhead())
	_, _ = rand.Read(nonce)
	return s.sealer.Seal(nonce, nonce, []byte(plaintext), []byte(sealAAD))
}

// open reverses seal.
func (s *Store) open(sealed []byte) (string, error) {
	ns := s.sealer.NonceSize()
	if len(sealed) < ns+s.sealer.Overhead() {
		return "", errors.New("store: sealed secret too short")
	}
	pt, err := s.sealer.Open(nil, sealed[:ns], sealed[ns:], []byte(sealAAD))
	if err != nil {
		return "", errors.New("store: cannot decrypt secret (was GATEHOUSE_SECRET_KEY changed?)")
	}
	return string(pt), nil
}

// previewSuffixLen is how many trailing characters of a secret a preview shows.
const previewSuffixLen = 4

// minPreviewLen is the shortest secret (in characters) that gets a preview at all:
// four characters of a shorter one would give away too much.
const minPreviewLen = 24

// publicPrefixes are the scheme prefixes a preview may show: our own token and key
// prefixes and OpenAI-style "sk-". They are public, so showing them reveals nothing;
// any other start of a secret (a bootstrap token's "dev-") is part of the secret.
var publicPrefixes = []string{APITokenPrefix, ClientKeyPrefix, "sk-"}

// secretPreview is the one rule for every secret's preview (connections'
// apiKeyPreview, API tokens' and client keys' preview): "…9f2c", the last four
// characters, after a public scheme prefix when the secret starts with one
// ("sk-…9f2c", "gh_at_…9f2c"); "" — no preview at all — for a secret shorter than
// 24 characters.
func secretPreview(secret string) string {
	r := []rune(secret)
	if len(r) < minPreviewLen {
		return ""
	}
	prefix := ""
	for _, p := range publicPrefixes {
		if strings.HasPrefix(secret, p) {
			prefix = p
			break
		}
	}
	return prefix + "…" + string(r[len(r)-previewSuffixLen:])
}

// refreshPreview rewrites the stored preview of a bootstrap secret that already
// exists by the current rule, so a row written under an older rule (which showed a
// bootstrap token's "dev-" start) does not keep showing more than the rule allows.
// table is api_tokens or client_keys.
func (s *Store) refreshPreview(ctx context.Context, table, secret string) error {
	_, err := s.db.Exec(ctx, `UPDATE `+table+` SET preview = $2 WHERE secret_hash = $1 AND preview <> $2`,
		hashSecret(secret), secretPreview(secret))
	return translate(err)
}

// hashSecret is what api_tokens and client_keys store instead of the secret.
func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// newSecret returns prefix followed by 32 random bytes in unpadded base64url.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}
