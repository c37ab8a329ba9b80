// Package storetest gives tests real PostgreSQL databases: each call to URL or Pool
// creates a database cloned from a migrated template, dropped when the test ends.
//
// The server, chosen once per test binary: GATEHOUSE_TEST_DATABASE_URL (a postgres://
// URL of a role allowed to create databases) if set; else a throwaway cluster of the
// installed PostgreSQL (store/pglocal); else a container from testcontainers-go when a
// Docker engine answers. With none of these the test fails and says what to install.
//
// A package using URL or Pool calls Main from its TestMain (from an external _test
// package: storetest imports store), so the throwaway server is stopped and leaked
// goroutines fail the run:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/gatehouse-dev/gatehouse/store/pglocal"
)

// EnvURL names the variable that points tests at an existing server.
const EnvURL = "GATEHOUSE_TEST_DATABASE_URL"

// cleanupTimeout bounds each drop and shutdown after a test's context has ended.
const cleanupTimeout = 30 * time.Second

// shared is the test binary's server, set up on first use. It is package state
// because tests reach it through URL and Pool, and Main must shut it down.
var shared struct {
	once sync.Once
	env  *env
	err  error
}

// Main runs the tests, shuts the shared server down and fails the run on leaked
// goroutines (close every pool; Pool does it in t.Cleanup). It does not return.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain that has more to clean up: it returns the exit code
// instead of exiting.
func Run(m *testing.M) int {
	code := m.Run()
	// The gateway's default upstream client (fasthttp) ends its idle-connection
	// cleaner on its own, up to 30 s after a host's last connection closed.
	leakOpts := []goleak.Option{goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner")}
	if e := shared.env; e != nil {
		leakOpts = append(leakOpts, e.leakOpts...)
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		err := e.close(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "storetest: shut down test server: %v\n", err)
			code = max(code, 1)
		}
	}
	if code == 0 {
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintf(os.Stderr, "storetest: leaked goroutines: %v\n", err)
			code = 1
		}
	}
	return code
}

// URL returns the URL of a new database, cloned from the migrated template and
// dropped (with FORCE) when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "")
}

// newDatabase creates a database from template (the migrated one when empty).
func newDatabase(t testing.TB, template string) string {
	t.Helper()
	e := sharedEnv(t)
	if template == "" {
		template = e.template
	}
	name := "gh_test_" + randomHex(8)
	if err := e.clone(t.Context(), name, template); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := e.drop(ctx, name); err != nil {
			t.Errorf("storetest: %v", err)
		}
	})
	u, err := databaseURL(e.baseURL, name)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return u
}

// EmptyURL returns the URL of a new, empty database (no migrations applied), dropped
// when the test ends: for tests of migrations themselves.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "template0")
}

// Pool returns a pool on a new database (see URL), closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := URL(t)
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatalf("storetest: open pool: %v", err)
	}
	t.Cleanup(pool.Close) // runs before URL's drop
	return pool
}

// Cluster starts a throwaway PostgreSQL for this test alone, which it may stop and
// start (outages, restarts); it is removed when the test ends. Its databases are not
// migrated: use store.Migrate. It needs the PostgreSQL server binaries.
func Cluster(t testing.TB) *pglocal.Cluster {
	t.Helper()
	c, err := pglocal.Open(t.Context(), pglocal.Options{})
	if errors.Is(err, pglocal.ErrNoBinaries) {
		t.Fatalf("storetest: this test runs its own PostgreSQL: %v", err)
	}
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("storetest: close cluster: %v", err)
		}
	})
	return c
}

func sharedEnv(t testing.TB) *env {
	t.Helper()
	shared.once.Do(func() {
		// Not t.Context(): the server outlives this test.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.env, shared.err = newEnv(ctx)
	})
	if shared.err != nil {
		t.Fatalf("storetest: %v", shared.err)
	}
	return shared.env
}

// randomHex returns n random bytes as lower-case hex (valid in identifiers).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// sanitize quotes a database name for SQL.
func sanitize(name string) string { return pgx.Identifier{name}.Sanitize() }
