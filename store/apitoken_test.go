//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestAPITokens(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()

	tok, secret, err := s.CreateAPIToken(ctx, "tester", "ci", store.RoleViewer)
	if err != nil {
		t.Fatalf("CreateAPIToken: %v", err)
	}
	if !strings.HasPrefix(secret, store.APITokenPrefix) || len(secret) < 40 {
		t.Errorf("secret %q: want %s followed by 43 random characters", secret, store.APITokenPrefix)
	}
	if want := store.APITokenPrefix + "…" + secret[len(secret)-4:]; tok.Preview != want {
		t.Errorf("Preview = %q, want %q", tok.Preview, want)
	}
	got, err := s.LookupAPIToken(ctx, secret)
	if err != nil {
		t.Fatalf("LookupAPIToken: %v", err)
	}
	if got.ID != tok.ID || got.Role != store.RoleViewer || got.LastUsedAt == nil {
		t.Errorf("LookupAPIToken = %+v, want token %s (viewer) with LastUsedAt set", got, tok.ID)
	}
	if _, err := s.LookupAPIToken(ctx, secret+"x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LookupAPIToken(wrong secret): err = %v, want ErrNotFound", err)
	}

	const bootstrap = "bootstrap-token-0123456789"
	for i, want := range []bool{true, false} {
		created, err := s.EnsureAPIToken(ctx, "bootstrap", bootstrap, store.RoleAdmin)
		if err != nil || created != want {
			t.Fatalf("EnsureAPIToken call %d = %v, %v; want %v", i+1, created, err, want)
		}
	}
	if bt, err := s.LookupAPIToken(ctx, bootstrap); err != nil || bt.Role != store.RoleAdmin {
		t.Errorf("LookupAPIToken(bootstrap) = %+v, %v; want an admin token", bt, err)
	}
	if _, err := s.EnsureAPIToken(ctx, "short", "too-short", store.RoleAdmin); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("EnsureAPIToken(short secret): err = %v, want ErrInvalid", err)
	}
	if _, _, err := s.CreateAPIToken(ctx, "tester", "x", "root"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateAPIToken(bad role): err = %v, want ErrInvalid", err)
	}

	list, err := s.ListAPITokens(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListAPITokens = %d tokens, %v; want 2", len(list), err)
	}

	assertOnlyHashesStored(t, s, secret, bootstrap)

	if got, err := s.GetAPIToken(ctx, tok.ID); err != nil || got.ID != tok.ID || got.Name != "ci" || got.Role != store.RoleViewer {
		t.Errorf("GetAPIToken = %+v, %v; want token %s (ci, viewer)", got, err, tok.ID)
	}
	if _, err := s.GetAPIToken(ctx, "not-a-uuid"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetAPIToken(bad id): err = %v, want ErrNotFound", err)
	}

	if err := s.DeleteAPIToken(ctx, "tester", tok.ID); err != nil {
		t.Fatalf("DeleteAPIToken: %v", err)
	}
	if _, err := s.LookupAPIToken(ctx, secret); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LookupAPIToken after delete: err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetAPIToken(ctx, tok.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetAPIToken after delete: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteAPIToken(ctx, "tester", tok.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteAPIToken twice: err = %v, want ErrNotFound", err)
	}
	// create, ensure (once), delete
	if n := auditCount(t, s); n != 3 {
		t.Errorf("audit rows = %d, want 3", n)
	}
}

func TestClientKeys(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()

	key, secret, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("agent"))
	if err != nil {
		t.Fatalf("CreateClientKey: %v", err)
	}
	if !strings.HasPrefix(secret, store.ClientKeyPrefix) {
		t.Errorf("secret %q lacks prefix %s", secret, store.ClientKeyPrefix)
	}
	if got, err := s.LookupClientKey(ctx, secret); err != nil || got.ID != key.ID {
		t.Errorf("LookupClientKey = %+v, %v; want key %s", got, err, key.ID)
	}
	if _, err := s.LookupClientKey(ctx, "gh_ck_unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LookupClientKey(unknown): err = %v, want ErrNotFound", err)
	}

	const bootstrap = "bootstrap-client-key-abcdef"
	for i, want := range []bool{true, false} {
		created, err := s.EnsureClientKey(ctx, "bootstrap", bootstrap)
		if err != nil || created != want {
			t.Fatalf("EnsureClientKey call %d = %v, %v; want %v", i+1, created, err, want)
		}
	}
	if _, err := s.EnsureClientKey(ctx, "short", "short"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("EnsureClientKey(short secret): err = %v, want ErrInvalid", err)
	}

	byHash, err := s.ClientKeysByHash(ctx)
	if err != nil {
		t.Fatalf("ClientKeysByHash: %v", err)
	}
	if len(byHash) != 2 || byHash[store.ClientKeyHash(secret)].ID != key.ID || byHash[store.ClientKeyHash(bootstrap)].Name != "bootstrap" {
		t.Errorf("ClientKeysByHash = %+v, want exactly the two keys by their hashes", byHash)
	}
	if store.ClientKeyHash(secret) != sha256.Sum256([]byte(secret)) {
		t.Error("ClientKeyHash is not the SHA-256 of the secret")
	}

	assertOnlyHashesStored(t, s, secret, bootstrap)

	if got, err := s.GetClientKey(ctx, key.ID); err != nil || got.ID != key.ID || got.Name != "agent" {
		t.Errorf("GetClientKey = %+v, %v; want key %s (agent)", got, err, key.ID)
	}

	if err := s.DeleteClientKey(ctx, "tester", key.ID, 0); err != nil {
		t.Fatalf("DeleteClientKey: %v", err)
	}
	if _, err := s.GetClientKey(ctx, key.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetClientKey after delete: err = %v, want ErrNotFound", err)
	}
	list, err := s.ListClientKeys(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "bootstrap" {
		t.Errorf("ListClientKeys after delete = %+v, %v; want only the bootstrap key", list, err)
	}
	if err := s.DeleteClientKey(ctx, "tester", "malformed", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteClientKey(malformed id): err = %v, want ErrNotFound", err)
	}
}

// assertOnlyHashesStored checks that no secret appears in the database, in plain text
// or hex, while its SHA-256 does.
func assertOnlyHashesStored(t *testing.T, s *store.Store, secrets ...string) {
	t.Helper()
	dump := strings.ToLower(dumpDatabase(t, s))
	for _, secret := range secrets {
		if strings.Contains(dump, strings.ToLower(secret)) || strings.Contains(dump, hex.EncodeToString([]byte(secret))) {
			t.Errorf("database contains the secret %q", secret[:6]+"…")
		}
		h := sha256.Sum256([]byte(secret))
		if !strings.Contains(dump, hex.EncodeToString(h[:])) {
			t.Errorf("database lacks the SHA-256 of secret %q", secret[:6]+"…")
		}
	}
}

// TestEnsureRefreshesOldPreview: a bootstrap secret stored under the old preview
// rule ("dev-…4567", 8 of 27 characters) shows the current rule's preview after the
// next bootstrap, for API tokens and client keys alike.
func TestEnsureRefreshesOldPreview(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	s, err := store.New(pool, testSecretKey(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const secret = "dev-bootstrap-token-1234567"
	if _, err := s.EnsureAPIToken(ctx, "boot", secret, store.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EnsureClientKey(ctx, "boot", secret); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"api_tokens", "client_keys"} {
		if _, err := pool.Exec(ctx, `UPDATE `+table+` SET preview = 'dev-…4567'`); err != nil {
			t.Fatal(err)
		}
	}
	if created, err := s.EnsureAPIToken(ctx, "boot", secret, store.RoleAdmin); err != nil || created {
		t.Fatalf("EnsureAPIToken again: created %v, %v", created, err)
	}
	if created, err := s.EnsureClientKey(ctx, "boot", secret); err != nil || created {
		t.Fatalf("EnsureClientKey again: created %v, %v", created, err)
	}
	toks, err := s.ListAPITokens(ctx)
	if err != nil || len(toks) != 1 || toks[0].Preview != "…4567" {
		t.Errorf("api tokens %+v (%v), want one with preview …4567", toks, err)
	}
	keys, err := s.ListClientKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].Preview != "…4567" {
		t.Errorf("client keys %+v (%v), want one with preview …4567", keys, err)
	}
}
