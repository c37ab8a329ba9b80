//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

func mustCreateUser(t *testing.T, s *store.Store, email, password, role string) store.User {
	t.Helper()
	u, err := s.CreateUser(t.Context(), "tester", email, password, role)
	if err != nil {
		t.Fatalf("CreateUser(%q): %v", email, err)
	}
	return u
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	u := mustCreateUser(t, s, "Admin@Example.com", "correct horse", store.RoleAdmin)
	for _, tc := range []struct {
		name            string
		email, password string
		wantErr         error
	}{
		{name: "ok", email: "Admin@Example.com", password: "correct horse"},
		{name: "email case-insensitive", email: "admin@example.COM", password: "correct horse"},
		{name: "wrong password", email: "Admin@Example.com", password: "Correct horse", wantErr: store.ErrInvalidCredentials},
		{name: "empty password", email: "Admin@Example.com", password: "", wantErr: store.ErrInvalidCredentials},
		{name: "unknown email", email: "nobody@example.com", password: "correct horse", wantErr: store.ErrInvalidCredentials},
		{name: "NUL in email", email: "Admin@Example.com\x00", password: "correct horse", wantErr: store.ErrInvalidCredentials},
		{name: "invalid UTF-8 email", email: "Admin@Example.com\xff", password: "correct horse", wantErr: store.ErrInvalidCredentials},
		{name: "control character in email", email: "Admin@Example.com\n", password: "correct horse", wantErr: store.ErrInvalidCredentials},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Authenticate(t.Context(), tc.email, tc.password)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Authenticate: err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr == nil && got.ID != u.ID {
				t.Errorf("Authenticate returned user %s, want %s", got.ID, u.ID)
			}
		})
	}
}

func TestPasswordHashFormat(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	u := mustCreateUser(t, s, "hash@example.com", "s3cret-pass", store.RoleViewer)
	var hash string
	if err := poolOf(t, s).QueryRow(t.Context(), `SELECT password_hash FROM users WHERE id = $1`, u.ID).Scan(&hash); err != nil {
		t.Fatalf("read hash: %v", err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") || strings.Count(hash, "$") != 5 {
		t.Errorf("password_hash = %q, want argon2id PHC format", hash)
	}
	if strings.Contains(dumpDatabase(t, s), "s3cret-pass") {
		t.Error("database contains the plaintext password")
	}
}

func TestCreateUserErrors(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustCreateUser(t, s, "taken@example.com", "pw", store.RoleViewer)
	for _, tc := range []struct {
		name                  string
		email, password, role string
		want                  error
	}{
		{name: "duplicate email other case", email: "TAKEN@example.com", password: "pw", role: store.RoleViewer, want: store.ErrConflict},
		{name: "unknown role", email: "x@example.com", password: "pw", role: "root", want: store.ErrInvalid},
		{name: "empty email", email: " ", password: "pw", role: store.RoleViewer, want: store.ErrInvalid},
		{name: "empty password", email: "y@example.com", password: "", role: store.RoleViewer, want: store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.CreateUser(t.Context(), "tester", tc.email, tc.password, tc.role); !errors.Is(err, tc.want) {
				t.Errorf("CreateUser: err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestUserLifecycle(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	admin := mustCreateUser(t, s, "root@example.com", "pw-root", store.RoleAdmin)
	viewer := mustCreateUser(t, s, "view@example.com", "pw-view", store.RoleViewer)

	users, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatalf("ListUsers: %v", err)
	}
	if len(users) != 2 || users[0].ID != admin.ID || users[1].ID != viewer.ID {
		t.Errorf("ListUsers = %+v, want root then view", users)
	}
	if got, err := s.GetUserByEmail(ctx, "VIEW@example.com"); err != nil || got.ID != viewer.ID {
		t.Errorf("GetUserByEmail = %+v, %v; want the viewer", got, err)
	}
	if _, err := s.GetUser(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetUser(malformed): err = %v, want ErrNotFound", err)
	}

	// The last admin can be neither demoted nor deleted.
	if _, err := s.SetRole(ctx, "tester", admin.ID, store.RoleViewer); !errors.Is(err, store.ErrConflict) {
		t.Errorf("demote the last admin: err = %v, want ErrConflict", err)
	}
	if err := s.DeleteUser(ctx, "tester", admin.ID); !errors.Is(err, store.ErrConflict) {
		t.Errorf("delete the last admin: err = %v, want ErrConflict", err)
	}
	promoted, err := s.SetRole(ctx, "tester", viewer.ID, store.RoleAdmin)
	if err != nil || promoted.Role != store.RoleAdmin {
		t.Fatalf("SetRole(admin) = %+v, %v", promoted, err)
	}
	if _, err := s.SetRole(ctx, "tester", admin.ID, store.RoleViewer); err != nil {
		t.Errorf("demote one of two admins: %v", err)
	}

	// SetPassword replaces the password and ends the user's sessions.
	if err := s.SaveSession(ctx, []byte("sess-of-viewer"), viewer.ID, []byte("data"), futureTime()); err != nil {
		t.Fatalf("SaveSession: %v", err)
	}
	if err := s.SetPassword(ctx, "tester", viewer.ID, "pw-new"); err != nil {
		t.Fatalf("SetPassword: %v", err)
	}
	if _, err := s.Authenticate(ctx, "view@example.com", "pw-view"); !errors.Is(err, store.ErrInvalidCredentials) {
		t.Errorf("old password: err = %v, want ErrInvalidCredentials", err)
	}
	if _, err := s.Authenticate(ctx, "view@example.com", "pw-new"); err != nil {
		t.Errorf("new password: %v", err)
	}
	if _, _, err := s.LoadSession(ctx, []byte("sess-of-viewer")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session after SetPassword: err = %v, want ErrNotFound", err)
	}
	if err := s.SetPassword(ctx, "tester", "00000000-0000-4000-8000-000000000000", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetPassword(unknown): err = %v, want ErrNotFound", err)
	}

	if err := s.DeleteUser(ctx, "tester", admin.ID); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if _, err := s.GetUser(ctx, admin.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetUser after delete: err = %v, want ErrNotFound", err)
	}

	entries, err := s.ListAudit(ctx, 0, 50)
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	var actions []string
	for _, e := range entries {
		if e.Entity != store.EntityUser {
			t.Errorf("audit entity = %q, want user", e.Entity)
		}
		if strings.Contains(string(e.Before)+string(e.After), "argon2") {
			t.Errorf("audit entry %d contains a password hash", e.ID)
		}
		actions = append(actions, e.Action)
	}
	want := "delete set_password set_role set_role create create"
	if got := strings.Join(actions, " "); got != want {
		t.Errorf("audit actions = %q, want %q", got, want)
	}
}

func TestEnsureUser(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	created, err := s.EnsureUser(ctx, "admin@localhost", "first", store.RoleAdmin)
	if err != nil || !created {
		t.Fatalf("EnsureUser first = %v, %v; want created", created, err)
	}
	created, err = s.EnsureUser(ctx, "ADMIN@localhost", "second", store.RoleViewer)
	if err != nil || created {
		t.Fatalf("EnsureUser again = %v, %v; want not created", created, err)
	}
	u, err := s.Authenticate(ctx, "admin@localhost", "first")
	if err != nil {
		t.Fatalf("Authenticate with the first password: %v", err)
	}
	if u.Role != store.RoleAdmin {
		t.Errorf("role = %q, want admin (EnsureUser must leave an existing user alone)", u.Role)
	}
}

func TestConcurrentDemotionsKeepAnAdmin(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	a := mustCreateUser(t, s, "a@example.com", "pw", store.RoleAdmin)
	b := mustCreateUser(t, s, "b@example.com", "pw", store.RoleAdmin)
	var (
		wg   sync.WaitGroup
		errs [2]error
	)
	for i, id := range []string{a.ID, b.ID} {
		wg.Go(func() {
			if i == 0 {
				_, errs[i] = s.SetRole(ctx, "tester", id, store.RoleViewer)
			} else {
				errs[i] = s.DeleteUser(ctx, "tester", id)
			}
		})
	}
	wg.Wait()
	var ok, conflict int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrConflict):
			conflict++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || conflict != 1 {
		t.Errorf("%d succeeded and %d conflicted, want 1 and 1", ok, conflict)
	}
	users, err := s.ListUsers(ctx)
	if err != nil {
		t.Fatalf("ListUsers: %v", err)
	}
	admins := 0
	for _, u := range users {
		if u.Role == store.RoleAdmin {
			admins++
		}
	}
	if admins != 1 {
		t.Errorf("%d admins left, want 1", admins)
	}
}

// TestPasswordHashesBounded: many sign-ins at once never run more than 2 × GOMAXPROCS
// password hashes together (each holds 19 MiB); every one still gets its answer, and
// one whose request ends while it waits for a slot returns at once with that error.
func TestPasswordHashesBounded(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustCreateUser(t, s, "bounded@example.com", "correct horse", store.RoleViewer)
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			email := "bounded@example.com"
			if i%2 == 1 {
				email = fmt.Sprintf("nobody-%d@example.com", i) // an unknown e-mail hashes too
			}
			_, err := s.Authenticate(t.Context(), email, "wrong")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, store.ErrInvalidCredentials) {
			t.Errorf("Authenticate: %v, want ErrInvalidCredentials", err)
		}
	}
	peak, limit := s.PasswordHashPeak(), int64(2*runtime.GOMAXPROCS(0))
	if peak < 1 || peak > limit {
		t.Errorf("%d password hashes ran at once, want 1..%d", peak, limit)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Authenticate(ctx, "nobody@example.com", "wrong"); !errors.Is(err, context.Canceled) {
		t.Errorf("Authenticate with an ended context: %v, want context.Canceled", err)
	}
}
