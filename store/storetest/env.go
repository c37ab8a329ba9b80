package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/gatehouse-dev/gatehouse/migrations"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/pglocal"
)

// templateLockKey serialises template builds of test binaries sharing one server
// (the bytes of "gh:tmpl").
const templateLockKey int64 = 0x67683a746d706c

// env is the server a test binary's databases live on.
type env struct {
	baseURL  string // an administrative database; database URLs replace its path
	template string
	stop     func(ctx context.Context) error // nil for an external server
	leakOpts []goleak.Option

	mu    sync.Mutex // one administrative statement at a time on admin
	admin *pgx.Conn
}

// newEnv finds a server, connects and makes sure the template exists.
func newEnv(ctx context.Context) (*env, error) {
	e := &env{}
	if err := e.findServer(ctx); err != nil {
		return nil, err
	}
	admin, err := pgx.Connect(ctx, e.baseURL)
	if err != nil {
		_ = e.closeServer(ctx)
		return nil, fmt.Errorf("connect to test server: %w", err)
	}
	e.admin = admin
	if err := e.ensureTemplate(ctx); err != nil {
		_ = e.close(ctx)
		return nil, err
	}
	return e, nil
}

func (e *env) findServer(ctx context.Context) error {
	if u := os.Getenv(EnvURL); u != "" {
		if _, err := databaseURL(u, "x"); err != nil {
			return fmt.Errorf("%s: %w", EnvURL, err)
		}
		e.baseURL = u
		return nil
	}
	cluster, err := pglocal.Open(ctx, pglocal.Options{})
	if err == nil {
		e.baseURL = cluster.URL("postgres")
		e.stop = cluster.Close
		return nil
	}
	if !errors.Is(err, pglocal.ErrNoBinaries) {
		return fmt.Errorf("start throwaway PostgreSQL: %w", err)
	}
	dockerErr := e.startContainer(ctx)
	if dockerErr == nil {
		return nil
	}
	return fmt.Errorf("no PostgreSQL for tests: install the PostgreSQL server binaries "+
		"(e.g. apt-get install postgresql), or set %s to a postgres:// URL of a role that may create databases, "+
		"or start a Docker engine (%v; docker: %v)", EnvURL, err, dockerErr)
}

// ensureTemplate creates the migrated template database unless it exists. Its name
// carries a hash of the migrations, so binaries sharing a server (GATEHOUSE_TEST_
// DATABASE_URL) reuse it and a changed migration gets a new one; an advisory lock
// keeps concurrent binaries from building it twice.
func (e *env) ensureTemplate(ctx context.Context) error {
	name, err := templateName()
	if err != nil {
		return err
	}
	e.template = name
	if _, err := e.admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockKey); err != nil {
		return fmt.Errorf("lock template: %w", err)
	}
	defer func() {
		_, _ = e.admin.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, templateLockKey)
	}()

	var exists bool
	if err := e.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return nil
	}
	// Build under another name and rename at the end, so a half-built template left
	// by a crash is never cloned.
	building := name + "_build"
	if _, err := e.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+sanitize(building)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop unfinished template: %w", err)
	}
	if _, err := e.admin.Exec(ctx, `CREATE DATABASE `+sanitize(building)); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	u, err := databaseURL(e.baseURL, building)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return fmt.Errorf("open template: %w", err)
	}
	err = store.Migrate(ctx, pool)
	pool.Close() // CREATE DATABASE ... TEMPLATE fails while anyone is connected to it
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	if _, err := e.admin.Exec(ctx, `ALTER DATABASE `+sanitize(building)+` RENAME TO `+sanitize(name)); err != nil {
		return fmt.Errorf("finish template: %w", err)
	}
	if _, err := e.admin.Exec(ctx, `ALTER DATABASE `+sanitize(name)+` WITH ALLOW_CONNECTIONS false`); err != nil {
		return fmt.Errorf("finish template: %w", err)
	}
	return nil
}

// templateName is gatehouse_template_<first 12 hex of sha256 over the migrations>.
func templateName() (string, error) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		return "", fmt.Errorf("read migrations: %w", err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			return "", fmt.Errorf("read migrations: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return "gatehouse_template_" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// clone creates database name from template. Clones are made one at a time.
func (e *env) clone(ctx context.Context, name, template string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.admin.Exec(ctx, `CREATE DATABASE `+sanitize(name)+` TEMPLATE `+sanitize(template)); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// drop removes database name, ending any sessions still connected to it.
func (e *env) drop(ctx context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.admin.Exec(ctx, `DROP DATABASE IF EXISTS `+sanitize(name)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// close disconnects and stops a server this binary started.
func (e *env) close(ctx context.Context) error {
	var errs []error
	if e.admin != nil {
		errs = append(errs, e.admin.Close(ctx))
	}
	errs = append(errs, e.closeServer(ctx))
	return errors.Join(errs...)
}

func (e *env) closeServer(ctx context.Context) error {
	if e.stop == nil {
		return nil
	}
	return e.stop(ctx)
}

// databaseURL returns base with its database replaced by name.
func databaseURL(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", errors.New("test database URL must be a postgres:// URL")
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}
