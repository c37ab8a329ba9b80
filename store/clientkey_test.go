//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/migrations"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestClientKeyLimitsCRUD: a key is created with limits (enabled by default), read back,
// patched with a version check (a stale version writes nothing), and deleted with one;
// each write leaves an audit row and a config notification.
func TestClientKeyLimitsCRUD(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	changes := make(chan struct{}, 16)
	go func() { _ = s.ListenConfig(ctx, func() { changes <- struct{}{} }) }()
	waitSignal(t, changes, "the call after LISTEN is established")

	in := store.NewClientKeyInput("team-a")
	in.Limits = json.RawMessage(`{"weight": 3, "maxConcurrent": 2, "models": ["zai/*"]}`)
	k, secret, err := s.CreateClientKey(ctx, "alice", in)
	if err != nil {
		t.Fatalf("CreateClientKey: %v", err)
	}
	waitSignal(t, changes, "the notification of CreateClientKey")
	if !k.Enabled || k.Version != 1 || !jsonEqual(t, in.Limits, k.Limits) || k.UpdatedAt.IsZero() {
		t.Errorf("created key = %+v, want enabled, version 1, the limits given", k)
	}
	if got, err := s.GetClientKey(ctx, k.ID); err != nil || !cmp.Equal(got.Limits, k.Limits) || got.Name != "team-a" {
		t.Errorf("GetClientKey = %+v, %v; want %+v", got, err, k)
	}
	if _, _, err := s.CreateClientKey(ctx, "alice", store.NewClientKeyInput("team-a")); !errors.Is(err, store.ErrConflict) {
		t.Errorf("CreateClientKey(taken name): err = %v, want ErrConflict", err)
	}
	for _, bad := range []string{"has space", strings.Repeat("n", 65), "ünïcode"} {
		if _, _, err := s.CreateClientKey(ctx, "alice", store.NewClientKeyInput(bad)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("CreateClientKey(%q): err = %v, want ErrInvalid", bad, err)
		}
	}
	bad := store.NewClientKeyInput("array-limits")
	bad.Limits = json.RawMessage(`[]`)
	if _, _, err := s.CreateClientKey(ctx, "alice", bad); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("CreateClientKey(limits []): err = %v, want ErrInvalid", err)
	}

	if _, err := s.UpdateClientKey(ctx, "bob", k.ID, k.Version+1, func(cur store.ClientKey) (store.ClientKeyInput, error) {
		return cur.Input(), nil
	}); !errors.Is(err, store.ErrStale) {
		t.Fatalf("UpdateClientKey(stale version): err = %v, want ErrStale", err)
	}
	u, err := s.UpdateClientKey(ctx, "bob", k.ID, k.Version, func(cur store.ClientKey) (store.ClientKeyInput, error) {
		in := cur.Input()
		in.Enabled = false
		in.Limits = json.RawMessage(`{"rpm": 60}`)
		return in, nil
	})
	if err != nil {
		t.Fatalf("UpdateClientKey: %v", err)
	}
	waitSignal(t, changes, "the notification of UpdateClientKey")
	if u.Enabled || u.Version != 2 || !jsonEqual(t, []byte(`{"rpm": 60}`), u.Limits) {
		t.Errorf("updated key = %+v, want disabled, version 2, rpm 60", u)
	}
	// A disabled key still authenticates as itself (the gateway answers 403, not 401).
	if got, err := s.LookupClientKey(ctx, secret); err != nil || got.ID != k.ID || got.Enabled {
		t.Errorf("LookupClientKey(disabled) = %+v, %v; want the disabled key", got, err)
	}
	if err := s.DeleteClientKey(ctx, "carol", k.ID, 1); !errors.Is(err, store.ErrStale) {
		t.Errorf("DeleteClientKey(stale version): err = %v, want ErrStale", err)
	}
	if err := s.DeleteClientKey(ctx, "carol", k.ID, 2); err != nil {
		t.Fatalf("DeleteClientKey: %v", err)
	}
	waitSignal(t, changes, "the notification of DeleteClientKey")

	entries, err := s.ListAudit(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Entity == store.EntityClientKey && e.EntityID == k.ID {
			got = append(got, e.Actor+" "+e.Action)
		}
		if strings.Contains(string(e.Before)+string(e.After), secret) {
			t.Errorf("audit entry %d holds the secret", e.ID)
		}
	}
	if diff := cmp.Diff([]string{"carol delete", "bob update", "alice create"}, got); diff != "" {
		t.Errorf("audit rows mismatch (-want +got):\n%s", diff)
	}
}

// TestEnsureClientKeyTakesAFreeName: a bootstrap key whose name another key holds takes
// name-2 instead of failing (names are unique).
func TestEnsureClientKeyTakesAFreeName(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	if _, _, err := s.CreateClientKey(ctx, "alice", store.NewClientKeyInput("bootstrap")); err != nil {
		t.Fatal(err)
	}
	if created, err := s.EnsureClientKey(ctx, "bootstrap", "bootstrap-secret-0123456789"); err != nil || !created {
		t.Fatalf("EnsureClientKey = %v, %v; want created", created, err)
	}
	k, err := s.LookupClientKey(ctx, "bootstrap-secret-0123456789")
	if err != nil || k.Name != "bootstrap-2" {
		t.Errorf("bootstrap key = %+v, %v; want the name bootstrap-2", k, err)
	}
}

// TestMigrationRenamesDuplicateKeyNames applies the migrations before 0003 to an empty
// database, stores client keys with repeated and invalid names, then applies 0003:
// the oldest of each name keeps it, the others become name-2, name-3 … (skipping names
// taken), invalid names are sanitised, every rename is audited, and names are unique.
func TestMigrationRenamesDuplicateKeyNames(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := openPool(t, storetest.EmptyURL(t))
	before := fstest.MapFS{}
	for _, name := range migrationNames(t) {
		if name >= "0003" {
			break
		}
		b, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		before[name] = &fstest.MapFile{Data: b}
	}
	if err := store.MigrateFS(ctx, pool, before); err != nil {
		t.Fatalf("migrate to 0002: %v", err)
	}
	long := strings.Repeat("x", 64)
	names := []string{"agent", "agent", "agent", "agent-2", "has space", "has space", "", long, long, "ünï"}
	for i, n := range names {
		if _, err := pool.Exec(ctx, `INSERT INTO client_keys (name, secret_hash, created_at)
			VALUES ($1, sha256($2::bytea), now() + make_interval(secs => $3))`, n, []byte{byte(i)}, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Migrate(ctx, pool); err != nil {
		t.Fatalf("migrate 0003: %v", err)
	}
	rows, err := pool.Query(ctx, `SELECT name FROM client_keys ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	want := []string{"agent", "agent-3", "agent-4", "agent-2", "has-space", "has-space-2", "key",
		long, strings.Repeat("x", 62) + "-2", "-n-"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names after 0003 mismatch (-want +got):\n%s", diff)
	}
	var audited int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE entity = 'client_key' AND action = 'update'`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if audited != 7 {
		t.Errorf("%d renames audited, want 7", audited)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO client_keys (name, secret_hash) VALUES ('agent', sha256('x'::bytea))`); err == nil {
		t.Error("a second key named agent was stored after 0003, want a unique violation")
	}
	var limits string
	var enabled bool
	var version int64
	if err := pool.QueryRow(ctx, `SELECT limits::text, enabled, version FROM client_keys WHERE name = 'agent'`).Scan(&limits, &enabled, &version); err != nil {
		t.Fatal(err)
	}
	if limits != "{}" || !enabled || version != 1 {
		t.Errorf("existing key after 0003: limits %s, enabled %v, version %d; want {}, true, 1", limits, enabled, version)
	}
}
