package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestCLIUsageErrorsStartNoDatabase: a command line that cannot succeed fails with a
// message that says why, before any managed Postgres is started (the data dir is
// never created).
func TestCLIUsageErrorsStartNoDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{name: "key create without name", args: []string{"key", "create"}, want: "--name is required"},
		{name: "key create weight out of range", args: []string{"key", "create", "--name", "a", "--weight", "0", "--max-concurrent", "10001"},
			want: "--max-concurrent: must be a whole number from 0 to 10000; --weight: must be a whole number from 1 to 1000"},
		{name: "key create weight not a number", args: []string{"key", "create", "--name", "a", "--weight", "x"}, want: "must be a whole number"},
		{name: "token create without name", args: []string{"token", "create"}, want: "--name is required"},
		{name: "token create bad role", args: []string{"token", "create", "--name", "ops", "--role", "root"}, want: `--role must be "admin" or "viewer"`},
		{name: "user add without email", args: []string{"user", "add", "--role", "viewer"}, stdin: "a-long-password\n", want: "--email is required"},
		{name: "user add bad email", args: []string{"user", "add", "--email", "not-an-email", "--role", "viewer"}, stdin: "a-long-password\n", want: "not an email address"},
		{name: "user add bad role", args: []string{"user", "add", "--email", "v@example.com", "--role", "boss"}, stdin: "a-long-password\n", want: `--role must be "admin" or "viewer"`},
		{name: "user add no password", args: []string{"user", "add", "--email", "v@example.com", "--role", "viewer"}, want: "no password"},
		{name: "user passwd without email", args: []string{"user", "passwd"}, stdin: "a-long-password\n", want: "--email is required"},
		{name: "user passwd no password", args: []string{"user", "passwd", "--email", "v@example.com"}, want: "user passwd: no password"},
		{name: "serve bad outbound", args: []string{"serve", "--outbound", "curl"}, want: `GATEHOUSE_OUTBOUND "curl": want net/http or fasthttp`},
		{name: "serve bad trusted proxies", args: []string{"serve", "--trusted-proxies", "10.0.0.0/8,10.0.0.0/33"}, want: `GATEHOUSE_TRUSTED_PROXIES: entry 2 "10.0.0.0/33"`},
		{name: "stray argument", args: []string{"migrate", "now"}, want: `unexpected argument "now"`},
		{name: "name given without flag", args: []string{"key", "create", "agents"}, want: `unexpected argument "agents"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir, getenv := dataDirOnly(t)
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, getenv, strings.NewReader(tt.stdin), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want an error saying %q", tt.args, err, tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("run(%q) printed %q on stdout, want nothing", tt.args, stdout.String())
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("run(%q) created the data dir (stat: %v): it started the database for a usage error", tt.args, err)
			}
		})
	}
}

// TestUserPasswd: gatehouse user passwd sets a user's password from
// GATEHOUSE_USER_PASSWORD or stdin, ends every session of that user, writes an audit
// row without the secret, and the old password no longer signs in.
func TestUserPasswd(t *testing.T) {
	t.Parallel()
	dbURL, secret, env := cliDB(t)
	cli := func(stdin string, extraEnv map[string]string, args ...string) (string, error) {
		getenv := func(k string) string {
			if v, ok := extraEnv[k]; ok {
				return v
			}
			return env[k]
		}
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), args, getenv, strings.NewReader(stdin), &stdout, &stderr)
		return stdout.String(), err
	}
	const oldPassword, newPassword, stdinPassword = "the first password", "the second password", "the third password"
	if _, err := cli(oldPassword+"\n", nil, "user", "add", "--email", "ada@example.com", "--role", "viewer"); err != nil {
		t.Fatalf("user add: %v", err)
	}

	st := openTestStore(t, dbURL, secret)
	u, err := st.Authenticate(t.Context(), "ada@example.com", oldPassword)
	if err != nil {
		t.Fatalf("authenticate before: %v", err)
	}
	sessions := [][]byte{}
	for _, id := range []string{"browser-1", "browser-2"} {
		h := sha256.Sum256([]byte(id))
		if err := st.SaveSession(t.Context(), h[:], u.ID, nil, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, h[:])
	}

	out, err := cli("", map[string]string{"GATEHOUSE_USER_PASSWORD": newPassword}, "user", "passwd", "--email", "ADA@example.com")
	if err != nil {
		t.Fatalf("user passwd: %v", err)
	}
	if !strings.Contains(out, "password of ada@example.com changed") || strings.Contains(out, newPassword) {
		t.Errorf("user passwd printed %q", out)
	}
	for i, h := range sessions {
		if _, _, err := st.LoadSession(t.Context(), h); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("session %d after user passwd: %v, want ErrNotFound (ended)", i+1, err)
		}
	}
	if _, err := st.Authenticate(t.Context(), "ada@example.com", oldPassword); !errors.Is(err, store.ErrInvalidCredentials) {
		t.Errorf("old password after user passwd: %v, want ErrInvalidCredentials", err)
	}
	if _, err := st.Authenticate(t.Context(), "ada@example.com", newPassword); err != nil {
		t.Errorf("new password: %v", err)
	}
	entries, err := st.ListAuditFor(t.Context(), store.AuditFilter{Entity: store.EntityUser, EntityID: u.ID}, 0, 1)
	if err != nil || len(entries) != 1 || entries[0].Action != store.ActionSetPassword || entries[0].Actor != store.ActorSystem {
		t.Fatalf("newest audit row = %+v (%v), want a set_password by system", entries, err)
	}
	if row := string(entries[0].Before) + string(entries[0].After); strings.Contains(row, newPassword) {
		t.Errorf("audit row holds the password: %s", row)
	}

	// The password may come from one line of stdin too.
	if _, err := cli(stdinPassword+"\n", nil, "user", "passwd", "--email", "ada@example.com"); err != nil {
		t.Fatalf("user passwd from stdin: %v", err)
	}
	if _, err := st.Authenticate(t.Context(), "ada@example.com", stdinPassword); err != nil {
		t.Errorf("password from stdin: %v", err)
	}
	if _, err := cli(newPassword+"\n", nil, "user", "passwd", "--email", "nobody@example.com"); err == nil || !strings.Contains(err.Error(), "no user with email nobody@example.com") {
		t.Errorf("unknown email: %v", err)
	}
}

// TestKeyCreateWithLimits: key create --weight --max-concurrent stores those limits on
// the new key and prints only its secret.
func TestKeyCreateWithLimits(t *testing.T) {
	t.Parallel()
	dbURL, secret, env := cliDB(t)
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"key", "create", "--name", "fleet", "--weight", "3", "--max-concurrent", "2"},
		func(k string) string { return env[k] }, strings.NewReader(""), &stdout, &stderr); err != nil {
		t.Fatalf("key create: %v (%s)", err, stderr.String())
	}
	printed := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(printed, store.ClientKeyPrefix) || strings.Contains(printed, "\n") {
		t.Fatalf("key create printed %q, want only the secret", stdout.String())
	}
	st := openTestStore(t, dbURL, secret)
	k, err := st.LookupClientKey(t.Context(), printed)
	if err != nil {
		t.Fatalf("the printed secret is no key: %v", err)
	}
	if k.Name != "fleet" || !k.Enabled || !strings.Contains(string(k.Limits), `"weight": 3`) || !strings.Contains(string(k.Limits), `"maxConcurrent": 2`) {
		t.Errorf("created key = %+v (limits %s), want fleet with weight 3 and maxConcurrent 2", k, k.Limits)
	}
}

// cliDB returns a fresh database's URL, a new secret key, and the environment of a
// command run against them with a data dir of the test's own.
func cliDB(t *testing.T) (dbURL, secret string, env map[string]string) {
	t.Helper()
	dbURL = storetest.URL(t)
	secret = store.GenerateSecretKey()
	return dbURL, secret, map[string]string{
		"GATEHOUSE_DATABASE_URL": dbURL,
		"GATEHOUSE_SECRET_KEY":   secret,
		"GATEHOUSE_DATA_DIR":     filepath.Join(t.TempDir(), "data"),
	}
}

// dataDirOnly returns a data dir that does not exist yet and an environment that
// names only it, for commands that must fail before they start a database.
func dataDirOnly(t *testing.T) (dataDir string, getenv func(string) string) {
	dataDir = filepath.Join(t.TempDir(), "data")
	return dataDir, func(k string) string {
		if k == "GATEHOUSE_DATA_DIR" {
			return dataDir
		}
		return ""
	}
}

// openTestStore opens the store at dbURL under the secret key secret (base64), with
// its pool closed at the end of the test.
func openTestStore(t *testing.T, dbURL, secret string) *store.Store {
	t.Helper()
	key, err := store.ParseSecretKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := store.New(pool, key, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
