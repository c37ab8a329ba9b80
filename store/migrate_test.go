//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/migrations"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func migrationNames(t *testing.T) []string {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		t.Fatalf("read migrations: %v", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	return names
}

type appliedRow struct {
	Version   string
	AppliedAt time.Time
}

func appliedRows(t *testing.T, pool *pgxpool.Pool) []appliedRow {
	t.Helper()
	rows, _ := pool.Query(t.Context(), `SELECT version, applied_at FROM schema_migrations ORDER BY version`)
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[appliedRow])
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return got
}

func versions(rows []appliedRow) []string {
	var v []string
	for _, r := range rows {
		v = append(v, r.Version)
	}
	return v
}

func advisoryLocks(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	// pg_locks spans the whole cluster, and parallel tests migrate other databases in
	// it: count only this database's advisory locks.
	const q = `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
		WHERE l.locktype = 'advisory' AND d.datname = current_database()`
	if err := pool.QueryRow(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("count advisory locks: %v", err)
	}
	return n
}

func TestMigrateAppliesAllThenIsNoOp(t *testing.T) {
	t.Parallel()
	pool := openPool(t, storetest.EmptyURL(t))

	ok, err := store.MigrationsApplied(t.Context(), pool)
	if err != nil || ok {
		t.Fatalf("MigrationsApplied on an empty database = %v, %v; want false, nil", ok, err)
	}
	if err := store.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	first := appliedRows(t, pool)
	if diff := cmp.Diff(migrationNames(t), versions(first)); diff != "" {
		t.Errorf("applied versions mismatch (-want +got):\n%s", diff)
	}
	if ok, err := store.MigrationsApplied(t.Context(), pool); err != nil || !ok {
		t.Errorf("MigrationsApplied after Migrate = %v, %v; want true, nil", ok, err)
	}

	if err := store.Migrate(t.Context(), pool); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if diff := cmp.Diff(first, appliedRows(t, pool)); diff != "" {
		t.Errorf("second Migrate changed schema_migrations (-want +got):\n%s", diff)
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Errorf("advisory locks held after Migrate = %d, want 0", n)
	}
}

func TestMigrateConcurrentProcesses(t *testing.T) {
	t.Parallel()
	url := storetest.EmptyURL(t)
	// Two pools stand for two processes starting at once.
	pools := []*pgxpool.Pool{openPool(t, url), openPool(t, url)}

	start := make(chan struct{})
	errs := make([]error, len(pools))
	var wg sync.WaitGroup
	for i, p := range pools {
		wg.Go(func() {
			<-start
			errs[i] = store.Migrate(t.Context(), p)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	if diff := cmp.Diff(migrationNames(t), versions(appliedRows(t, pools[0]))); diff != "" {
		t.Errorf("applied versions mismatch (-want +got):\n%s", diff)
	}
}

func TestMigrateFailureIsWrappedAndRolledBack(t *testing.T) {
	t.Parallel()
	pool := openPool(t, storetest.EmptyURL(t))
	// A table the first migration creates already exists, so it fails midway.
	if _, err := pool.Exec(t.Context(), `CREATE TABLE users (id int)`); err != nil {
		t.Fatalf("prepare: %v", err)
	}

	err := store.Migrate(t.Context(), pool)
	if err == nil {
		t.Fatal("Migrate succeeded over a conflicting table")
	}
	if want := "store: migrate 0001_init.sql: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error = %q, want prefix %q", err, want)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42P07" {
		t.Errorf("error = %v, want a wrapped duplicate_table (42P07)", err)
	}
	if got := appliedRows(t, pool); len(got) != 0 {
		t.Errorf("schema_migrations = %v after a failed migration, want empty", got)
	}
	var connectionsTable bool
	if err := pool.QueryRow(t.Context(), `SELECT to_regclass('provider_connections') IS NOT NULL`).Scan(&connectionsTable); err != nil {
		t.Fatal(err)
	}
	if connectionsTable {
		t.Error("provider_connections exists: the failed migration was not rolled back")
	}
	if n := advisoryLocks(t, pool); n != 0 {
		t.Errorf("advisory locks held after a failed Migrate = %d, want 0", n)
	}
}

func TestMigrateCanceledContext(t *testing.T) {
	t.Parallel()
	pool := openPool(t, storetest.EmptyURL(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := store.Migrate(ctx, pool); !errors.Is(err, context.Canceled) {
		t.Errorf("Migrate with a canceled context = %v, want context.Canceled", err)
	}
	if err := store.Migrate(t.Context(), pool); err != nil {
		t.Errorf("Migrate after a canceled attempt: %v", err)
	}
}
