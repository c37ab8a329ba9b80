package store

import (
	"bytes"
	"strings"
	"testing"
)

// TestSecretPreview: the one preview rule — the last four characters after a
// public scheme prefix, nothing at all below 24 characters — for every kind of
// secret (a 27-character bootstrap token once showed 8 of its characters).
func TestSecretPreview(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{name: "openai style", in: "sk-proj-abcdefghijkl9f2c", want: "sk-…9f2c"},
		{name: "no prefix", in: "0123456789abcdefghij9f2c", want: "…9f2c"},
		{name: "a prefix of its own is secret", in: "dev-0123456789abcdefghij", want: "…ghij"},
		{name: "27-character bootstrap token", in: "dev-bootstrap-token-1234567", want: "…4567"},
		{name: "our api token", in: "gh_at_ab-cdefghijklmnopqrstuvwxyz0123456789AB", want: "gh_at_…89AB"},
		{name: "our client key", in: "gh_ck_ab-cdefghijklmnopqrstuvwxyz0123456789AB", want: "gh_ck_…89AB"},
		{name: "23 characters: none", in: "0123456789abcdefghij9f2", want: ""},
		{name: "16-character secret: none", in: "sk-0123456789abc", want: ""},
		{name: "24 characters", in: "0123456789abcdefghij9f2c", want: "…9f2c"},
		{name: "empty", in: "", want: ""},
		{name: "multibyte counted as characters", in: strings.Repeat("é", 20) + "1234", want: "…1234"},
		{name: "multibyte too short", in: strings.Repeat("é", 22), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := secretPreview(tc.in); got != tc.want {
				t.Errorf("secretPreview(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	aead, err := newSealer(bytes.Repeat([]byte{9}, SecretKeySize))
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{sealer: aead}
	const key = "sk-upstream-secret"
	a, b := s.seal(key), s.seal(key)
	if bytes.Equal(a, b) {
		t.Error("two seals of the same key are equal: nonce not random")
	}
	if bytes.Contains(a, []byte(key)) {
		t.Error("sealed value contains the plaintext")
	}
	got, err := s.open(a)
	if err != nil || got != key {
		t.Fatalf("open(seal(key)) = %q, %v", got, err)
	}
	a[len(a)-1] ^= 1
	if _, err := s.open(a); err == nil {
		t.Error("open of a tampered value: no error")
	}
	if _, err := s.open(a[:5]); err == nil {
		t.Error("open of a truncated value: no error")
	}
}

func TestPasswordHash(t *testing.T) {
	t.Parallel()
	h := hashPassword("hunter2")
	if h == hashPassword("hunter2") {
		t.Error("two hashes of one password are equal: salt not random")
	}
	for _, tc := range []struct {
		name, hash, password string
		want, wantErr        bool
	}{
		{name: "match", hash: h, password: "hunter2", want: true},
		{name: "mismatch", hash: h, password: "hunter3"},
		{name: "not phc", hash: "plain", password: "hunter2", wantErr: true},
		{name: "bcrypt", hash: "$2a$10$abcdefghijklmnopqrstuv", password: "x", wantErr: true},
		{name: "huge memory", hash: strings.Replace(h, "m=19456", "m=99999999", 1), password: "hunter2", wantErr: true},
		{name: "zero time", hash: strings.Replace(h, "t=2", "t=0", 1), password: "hunter2", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkPassword(tc.hash, tc.password)
			if (err != nil) != tc.wantErr {
				t.Fatalf("checkPassword: err = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("checkPassword = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsUUID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"6f1c0000-0000-4000-8000-000000000000", true},
		{"6F1C0000-ABCD-4000-8000-00000000000F", true},
		{"6f1c0000000040008000000000000000", false},
		{"6f1c0000-0000-4000-8000-00000000000g", false},
		{"", false},
		{"6f1c0000-0000-4000-8000-0000000000000", false},
	} {
		if got := isUUID(tc.in); got != tc.want {
			t.Errorf("isUUID(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
