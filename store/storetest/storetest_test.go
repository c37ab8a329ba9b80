package storetest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestParallelTestsGetIsolatedDatabases(t *testing.T) {
	// Both subtests write before either reads, so they really overlap.
	var written sync.WaitGroup
	written.Add(2)
	for _, tc := range []struct{ name, email string }{
		{name: "first", email: "a@example.com"},
		{name: "second", email: "b@example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := storetest.Pool(t)
			_, err := pool.Exec(t.Context(), `INSERT INTO users (email, password_hash, role) VALUES ($1, 'x', 'admin')`, tc.email)
			written.Done()
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			written.Wait()
			rows, _ := pool.Query(t.Context(), `SELECT email FROM users`)
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatalf("select: %v", err)
			}
			if diff := cmp.Diff([]string{tc.email}, got); diff != "" {
				t.Errorf("users mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTemplateIsMigrated(t *testing.T) {
	t.Parallel()
	pool := storetest.Pool(t)
	ok, err := store.MigrationsApplied(t.Context(), pool)
	if err != nil || !ok {
		t.Fatalf("MigrationsApplied = %v, %v; want true, nil", ok, err)
	}
	for _, table := range []string{"provider_connections", "settings", "users", "api_tokens", "client_keys", "audit_log", "sessions", "usage_daily"} {
		var exists bool
		if err := pool.QueryRow(t.Context(), `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists); err != nil {
			t.Fatalf("look up %s: %v", table, err)
		}
		if !exists {
			t.Errorf("table %s missing from a cloned database", table)
		}
	}
}

func TestEmptyURLHasNoSchema(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(t.Context(), storetest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	ok, err := store.MigrationsApplied(t.Context(), pool)
	if err != nil || ok {
		t.Fatalf("MigrationsApplied on EmptyURL = %v, %v; want false, nil", ok, err)
	}
}

func TestDatabaseIsDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("user", func(t *testing.T) {
		// Registered first so it runs after the drop: the drop must end this session.
		var conn *pgx.Conn
		t.Cleanup(func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		})
		var err error
		conn, err = pgx.Connect(t.Context(), storetest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	pool := storetest.Pool(t)
	var exists bool
	if err := pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if name == "" || exists {
		t.Errorf("database %q still exists after its test ended", name)
	}
}

func TestClusterStopStart(t *testing.T) {
	t.Parallel()
	c := storetest.Cluster(t)
	ping := func() error {
		conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
		if err != nil {
			return err
		}
		defer conn.Close(t.Context())
		return conn.Ping(t.Context())
	}
	if err := ping(); err != nil {
		t.Fatalf("ping a started cluster: %v", err)
	}
	if err := c.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := ping(); err == nil {
		t.Fatal("ping succeeded on a stopped cluster")
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := ping(); err != nil {
		t.Fatalf("ping a restarted cluster: %v", err)
	}
	if c.PID() == 0 {
		t.Error("PID() = 0 for a running cluster")
	}
}
