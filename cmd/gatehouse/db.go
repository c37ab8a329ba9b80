package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/pglocal"
)

// managedDBName is the database Gatehouse uses inside its managed cluster.
const managedDBName = "gatehouse"

// database is an open, migrated database and what must be closed with it.
type database struct {
	pool    *pgxpool.Pool
	store   *store.Store
	cluster *pglocal.Cluster // nil with GATEHOUSE_DATABASE_URL
	url     string
	// secretKey is the installation secret (session keys are derived from it).
	secretKey []byte
}

// Close closes the pool and stops a managed cluster this process owns.
func (d *database) Close(ctx context.Context) error {
	d.pool.Close()
	if d.cluster != nil {
		return d.cluster.Close(ctx)
	}
	return nil
}

// openDatabase connects to GATEHOUSE_DATABASE_URL, or else to the managed Postgres of the
// data dir. With attach, a command that finds a running serve holding the data dir uses
// its server; otherwise it starts (and later stops) the cluster itself. serve passes
// attach=false: two servers on one data dir are an error.
func openDatabase(ctx context.Context, cfg *config, attach bool, logger *slog.Logger) (*database, error) {
	db := &database{url: cfg.DatabaseURL}
	if db.url == "" {
		cluster, err := pglocal.Open(ctx, pglocal.Options{DataDir: cfg.DataDir, Attach: attach, Logger: logger})
		if err != nil {
			if errors.Is(err, pglocal.ErrLocked) {
				return nil, fmt.Errorf("another gatehouse serve is using %s: stop it or choose another GATEHOUSE_DATA_DIR", cfg.DataDir)
			}
			return nil, err
		}
		db.cluster = cluster
		if err := ensureDatabase(ctx, cluster.URL("postgres"), managedDBName); err != nil {
			_ = cluster.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		db.url = cluster.URL(managedDBName)
	}
	secret, err := secretKey(cfg, db.cluster != nil)
	if err != nil {
		_ = db.closeCluster(ctx)
		return nil, err
	}
	pool, err := pgxpool.New(ctx, db.url)
	if err != nil {
		_ = db.closeCluster(ctx)
		return nil, fmt.Errorf("database: %w", err)
	}
	db.pool = pool
	if err := store.Migrate(ctx, pool); err != nil {
		_ = db.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	st, err := store.New(pool, secret, logger)
	if err != nil {
		_ = db.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	db.store = st
	db.secretKey = secret
	return db, nil
}

func (d *database) closeCluster(ctx context.Context) error {
	if d.cluster == nil {
		return nil
	}
	return d.cluster.Close(context.WithoutCancel(ctx))
}

// ensureDatabase creates the database name in the cluster at adminURL when missing.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("database: connect to managed postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("database: look up %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		var again bool
		// A concurrent CLI command may have created it first.
		if qerr := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&again); qerr == nil && again {
			return nil
		}
		return fmt.Errorf("database: create %s: %w", name, err)
	}
	return nil
}

// secretKeyFile is where a managed installation keeps its generated secret key.
const secretKeyFile = "secret.key"

// secretKey returns the installation secret: GATEHOUSE_SECRET_KEY, else (managed mode
// only) the one generated into the data dir with mode 0600.
func secretKey(cfg *config, managed bool) ([]byte, error) {
	if cfg.SecretKey != "" {
		k, err := store.ParseSecretKey(cfg.SecretKey)
		if err != nil {
			return nil, fmt.Errorf("GATEHOUSE_SECRET_KEY: %w", err)
		}
		return k, nil
	}
	if !managed {
		return nil, errors.New("GATEHOUSE_SECRET_KEY is required with GATEHOUSE_DATABASE_URL (32 bytes, hex or base64; e.g. openssl rand -hex 32)")
	}
	path := filepath.Join(cfg.DataDir, secretKeyFile)
	if err := writeSecretKeyOnce(cfg.DataDir, path); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secret key: read %s: %w", path, err)
	}
	k, err := store.ParseSecretKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("secret key in %s: %w", path, err)
	}
	return k, nil
}

// writeSecretKeyOnce generates the managed installation's secret key into path (mode
// 0600) unless it exists already; of two processes racing, the first one wins.
func writeSecretKeyOnce(dataDir, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("secret key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("secret key: %w", err)
	}
	_, err = f.WriteString(store.GenerateSecretKey() + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("secret key: write %s: %w", path, err)
	}
	return nil
}
