//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

func TestParseSecretKey(t *testing.T) {
	t.Parallel()
	key := make([]byte, store.SecretKeySize)
	for i := range key {
		key[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name    string
		in      string
		wantErr bool
	}{
		{name: "hex", in: hex.EncodeToString(key)},
		{name: "hex upper case with newline", in: string(bytes.ToUpper([]byte(hex.EncodeToString(key)))) + "\n"},
		{name: "std base64", in: base64.StdEncoding.EncodeToString(key)},
		{name: "raw std base64", in: base64.RawStdEncoding.EncodeToString(key)},
		{name: "url base64", in: base64.URLEncoding.EncodeToString(key)},
		{name: "raw url base64", in: base64.RawURLEncoding.EncodeToString(key)},
		{name: "empty", in: "", wantErr: true},
		{name: "hex too short", in: hex.EncodeToString(key[:31]), wantErr: true},
		{name: "hex too long", in: hex.EncodeToString(append(key, 1)), wantErr: true},
		{name: "base64 of 16 bytes", in: base64.StdEncoding.EncodeToString(key[:16]), wantErr: true},
		{name: "base64 of 48 bytes", in: base64.StdEncoding.EncodeToString(append(key, key[:16]...)), wantErr: true},
		{name: "garbage", in: "not a key at all!", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := store.ParseSecretKey(tc.in)
			if tc.wantErr {
				if err == nil {
					t.Errorf("ParseSecretKey(%q) = %x, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseSecretKey(%q): %v", tc.in, err)
			}
			if !bytes.Equal(got, key) {
				t.Errorf("ParseSecretKey(%q) = %x, want %x", tc.in, got, key)
			}
		})
	}
}

func TestGenerateSecretKey(t *testing.T) {
	t.Parallel()
	a, b := store.GenerateSecretKey(), store.GenerateSecretKey()
	if a == b {
		t.Error("two generated keys are equal")
	}
	k, err := store.ParseSecretKey(a)
	if err != nil || len(k) != store.SecretKeySize {
		t.Errorf("ParseSecretKey(GenerateSecretKey()) = %d bytes, %v; want 32 bytes", len(k), err)
	}
}

func TestDeriveKey(t *testing.T) {
	t.Parallel()
	secret := bytes.Repeat([]byte{1}, store.SecretKeySize)
	a := store.DeriveKey(secret, "gatehouse session-auth v1", 32)
	if len(a) != 32 {
		t.Fatalf("len = %d, want 32", len(a))
	}
	if !bytes.Equal(a, store.DeriveKey(secret, "gatehouse session-auth v1", 32)) {
		t.Error("DeriveKey is not deterministic")
	}
	if bytes.Equal(a, store.DeriveKey(secret, "gatehouse session-enc v1", 32)) {
		t.Error("different purposes give the same key")
	}
	if bytes.Equal(a, store.DeriveKey(bytes.Repeat([]byte{2}, 32), "gatehouse session-auth v1", 32)) {
		t.Error("different secrets give the same key")
	}
	if len(store.DeriveKey(secret, "x", 64)) != 64 {
		t.Error("DeriveKey(64) is not 64 bytes")
	}
}

func TestNewRejectsBadKey(t *testing.T) {
	t.Parallel()
	if _, err := store.New(nil, make([]byte, 32), nil); err == nil {
		t.Error("New(nil pool): no error")
	}
}
