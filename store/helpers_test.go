package store_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// testSecretKey returns a fixed 32-byte key; tests never need a random one.
func testSecretKey() []byte { return bytes.Repeat([]byte{0x42}, store.SecretKeySize) }

// newStore returns a Store on a fresh migrated database.
func newStore(t *testing.T) *store.Store { return newStoreTB(t) }

// newStoreTB is newStore for tests and benchmarks.
func newStoreTB(t testing.TB) *store.Store {
	t.Helper()
	pool := storetest.Pool(t)
	s, err := store.New(pool, testSecretKey(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("store.New: %v", err)
	}
	pools.Store(s, pool)
	t.Cleanup(func() { pools.Delete(s) })
	return s
}

// pools maps each Store of newStore to its pool, for the raw SQL of tests.
var pools sync.Map // *store.Store → *pgxpool.Pool

// poolOf returns the pool under s, a Store of newStore.
func poolOf(t *testing.T, s *store.Store) *pgxpool.Pool { return poolOfTB(t, s) }

// poolOfTB is poolOf for tests and benchmarks.
func poolOfTB(t testing.TB, s *store.Store) *pgxpool.Pool {
	t.Helper()
	p, ok := pools.Load(s)
	if !ok {
		t.Fatal("poolOf: not a Store of newStore")
	}
	return p.(*pgxpool.Pool)
}

// connInput returns a valid connection input named name.
func connInput(name string) store.ConnectionInput {
	return store.ConnectionInput{
		Name:               name,
		Provider:           "zai",
		APIStyle:           "openai",
		BaseURL:            "https://api.z.ai/api/paas/v4",
		APIKey:             "sk-" + name + "-secret-key-9f2c",
		Models:             []string{"glm-5", "glm-4.7"},
		Enabled:            true,
		RateLimitOverrides: json.RawMessage(`{"maxConcurrent": 4, "modelConcurrency": {"glm-5": 1}}`),
	}
}

func mustCreateConnection(t *testing.T, s *store.Store, in store.ConnectionInput) store.Connection {
	t.Helper()
	c, err := s.CreateConnection(t.Context(), "tester", in)
	if err != nil {
		t.Fatalf("CreateConnection(%q): %v", in.Name, err)
	}
	return c
}

// mustCreateClientKey creates an enabled client key without limits named name and
// returns it with its secret.
func mustCreateClientKey(t *testing.T, s *store.Store, name string) (store.ClientKey, string) {
	t.Helper()
	k, secret, err := s.CreateClientKey(t.Context(), store.ActorSystem, store.NewClientKeyInput(name))
	if err != nil {
		t.Fatal(err)
	}
	return k, secret
}

// jsonEqual reports whether two JSON documents are equal after normalisation.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// dumpDatabase returns every row of every table in the public schema as JSON text,
// so tests can assert that a secret appears nowhere.
func dumpDatabase(t *testing.T, s *store.Store) string {
	t.Helper()
	ctx := t.Context()
	rows, err := poolOf(t, s).Query(ctx,
		`SELECT quote_ident(table_name) FROM information_schema.tables
		 WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatalf("scan table name: %v", err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("list tables: %v", err)
	}
	var buf bytes.Buffer
	for _, table := range tables {
		rows, err := poolOf(t, s).Query(ctx, `SELECT row_to_json(t)::text FROM `+table+` t`)
		if err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatalf("scan %s: %v", table, err)
			}
			buf.WriteString(table + ": " + line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("dump %s: %v", table, err)
		}
	}
	return buf.String()
}
