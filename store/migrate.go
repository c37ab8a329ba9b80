package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/migrations"
)

// migrateLockKey is the pg_advisory_lock key that serialises migrators
// (the bytes of "gh:migr").
const migrateLockKey int64 = 0x67683a6d696772

const (
	sqlMigrateLock         = `SELECT pg_advisory_lock($1)`
	sqlMigrateUnlock       = `SELECT pg_advisory_unlock($1)`
	sqlCreateMigrations    = `CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`
	sqlAppliedMigrations   = `SELECT version FROM schema_migrations`
	sqlRecordMigration     = `INSERT INTO schema_migrations (version) VALUES ($1)`
	sqlMigrationsTableOpen = `SELECT to_regclass('schema_migrations') IS NOT NULL`
)

// Migrate applies the migrations in migrations.FS that schema_migrations does not list
// yet, in file-name order, each in its own transaction. A session advisory lock on one
// connection makes concurrent migrators (several processes starting at once) take
// turns; running it again is a no-op. A failure is returned as
// "store: migrate <file>: <cause>" and leaves earlier files applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return migrate(ctx, pool, migrations.FS)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	files, err := migrationFiles(fsys)
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, sqlMigrateLock, migrateLockKey); err != nil {
		return fmt.Errorf("store: migrate: lock: %w", err)
	}
	defer unlockMigrations(ctx, conn)

	if _, err := conn.Exec(ctx, sqlCreateMigrations); err != nil {
		return fmt.Errorf("store: migrate: create schema_migrations: %w", err)
	}
	rows, _ := conn.Query(ctx, sqlAppliedMigrations)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("store: migrate: read schema_migrations: %w", err)
	}
	applied := make(map[string]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	for _, name := range files {
		if applied[name] {
			continue
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return fmt.Errorf("store: migrate %s: %w", name, err)
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sqlRecordMigration, name)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: migrate %s: %w", name, err)
		}
	}
	return nil
}

// unlockMigrations releases the advisory lock even when ctx has ended. If that fails
// the connection is closed rather than returned to the pool still holding the lock.
func unlockMigrations(ctx context.Context, conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, sqlMigrateUnlock, migrateLockKey); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// MigrationsApplied reports whether every migration in migrations.FS has been applied
// (for readiness checks). A database without schema_migrations reports false.
func MigrationsApplied(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	return migrationsApplied(ctx, pool, migrations.FS)
}

func migrationsApplied(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (bool, error) {
	files, err := migrationFiles(fsys)
	if err != nil {
		return false, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, sqlMigrationsTableOpen).Scan(&exists); err != nil {
		return false, fmt.Errorf("store: migrations applied: %w", err)
	}
	if !exists {
		return false, nil
	}
	rows, _ := pool.Query(ctx, sqlAppliedMigrations)
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("store: migrations applied: %w", err)
	}
	applied := make(map[string]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	for _, name := range files {
		if !applied[name] {
			return false, nil
		}
	}
	return true, nil
}

// migrationFiles lists the *.sql files at the root of fsys in name order.
func migrationFiles(fsys fs.FS) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("store: migrate: list migrations: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, path.Base(e.Name()))
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, errors.New("store: migrate: no migration files")
	}
	return names, nil
}
