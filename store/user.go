package store

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Roles of users and API tokens.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// User is a dashboard user; the password hash never leaves the store.
type User struct {
	ID        string    `json:"id" db:"id"`
	Email     string    `json:"email" db:"email"`
	Role      string    `json:"role" db:"role"`
	CreatedAt time.Time `json:"createdAt" db:"created_at"`
	UpdatedAt time.Time `json:"updatedAt" db:"updated_at"`
}

const userColumns = `id, email, role, created_at, updated_at`

func checkUserInput(email, password, role string) error {
	if !isRole(role) {
		return fmt.Errorf("%w: role must be %q or %q", ErrInvalid, RoleAdmin, RoleViewer)
	}
	if email == "" {
		return fmt.Errorf("%w: email is required", ErrInvalid)
	}
	if password == "" {
		return fmt.Errorf("%w: password is required", ErrInvalid)
	}
	return nil
}

const createUserSQL = `
INSERT INTO users (email, password_hash, role) VALUES ($1, $2, $3)
RETURNING ` + userColumns

// CreateUser adds a user with an argon2id hash of password. It returns ErrConflict if
// the email is taken (compared case-insensitively) and ErrInvalid for an empty email or
// password or a role other than RoleAdmin or RoleViewer.
func (s *Store) CreateUser(ctx context.Context, actor, email, password, role string) (User, error) {
	email = strings.TrimSpace(email)
	if err := checkUserInput(email, password, role); err != nil {
		return User{}, fmt.Errorf("store: create user: %w", err)
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return User{}, fmt.Errorf("store: create user: %w", err)
	}
	var u User
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, createUserSQL, email, hash, role)
		var err error
		if u, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User]); err != nil {
			return translate(err)
		}
		return audit(ctx, tx, actor, ActionCreate, EntityUser, u.ID, nil, u)
	})
	if err != nil {
		return User{}, fmt.Errorf("store: create user %q: %w", email, err)
	}
	return u, nil
}

const ensureUserSQL = `
INSERT INTO users (email, password_hash, role) VALUES ($1, $2, $3)
ON CONFLICT (lower(email)) DO NOTHING
RETURNING ` + userColumns

// EnsureUser creates the user unless one with that email (case-insensitively) exists,
// in which case it changes nothing and reports created = false. ErrInvalid as for
// CreateUser.
func (s *Store) EnsureUser(ctx context.Context, email, password, role string) (created bool, err error) {
	email = strings.TrimSpace(email)
	if err := checkUserInput(email, password, role); err != nil {
		return false, fmt.Errorf("store: ensure user: %w", err)
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return false, fmt.Errorf("store: ensure user: %w", err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, ensureUserSQL, email, hash, role)
		u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
		if err != nil {
			if err = translate(err); err == ErrNotFound { // conflict: the user exists
				return nil
			}
			return err
		}
		created = true
		return audit(ctx, tx, ActorSystem, ActionCreate, EntityUser, u.ID, nil, u)
	})
	if err != nil {
		return false, fmt.Errorf("store: ensure user %q: %w", email, err)
	}
	return created, nil
}

const authenticateSQL = `SELECT ` + userColumns + `, password_hash FROM users WHERE lower(email) = lower($1)`

// Authenticate returns the user with that email (case-insensitively) if password
// matches, and ErrInvalidCredentials otherwise — also for an unknown email, after doing
// the same hashing work, so timing does not tell the two apart.
func (s *Store) Authenticate(ctx context.Context, email, password string) (User, error) {
	var (
		u    User
		hash string
	)
	err := ErrNotFound
	if signInEmail(email) {
		err = translate(s.db.QueryRow(ctx, authenticateSQL, strings.TrimSpace(email)).
			Scan(&u.ID, &u.Email, &u.Role, &u.CreatedAt, &u.UpdatedAt, &hash))
	}
	if err == ErrNotFound {
		if err := s.burnPassword(ctx, password); err != nil {
			return User{}, fmt.Errorf("store: authenticate: %w", err)
		}
		return User{}, ErrInvalidCredentials
	} else if err != nil {
		return User{}, fmt.Errorf("store: authenticate: %w", err)
	}
	var ok bool
	if gateErr := s.hashes.do(ctx, func() { ok, err = checkPassword(hash, password) }); gateErr != nil {
		return User{}, fmt.Errorf("store: authenticate: %w", gateErr)
	}
	if err != nil {
		// A hash we cannot read is an operator problem, not the user's: log, refuse.
		s.logger.Error("unreadable password hash", slog.String("user_id", u.ID), slog.Any("error", err))
		return User{}, ErrInvalidCredentials
	}
	if !ok {
		return User{}, ErrInvalidCredentials
	}
	return u, nil
}

const listUsersSQL = `SELECT ` + userColumns + ` FROM users ORDER BY lower(email)`

// ListUsers returns every user, ordered by email.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	rows, _ := s.db.Query(ctx, listUsersSQL)
	us, err := pgx.CollectRows(rows, pgx.RowToStructByName[User])
	if err != nil {
		return nil, fmt.Errorf("store: list users: %w", translate(err))
	}
	return us, nil
}

const getUserSQL = `SELECT ` + userColumns + ` FROM users WHERE id = $1`

// GetUser returns one user, or ErrNotFound.
func (s *Store) GetUser(ctx context.Context, id string) (User, error) {
	u, err := getUser(ctx, s.db, getUserSQL, id)
	if err != nil {
		return User{}, fmt.Errorf("store: get user %s: %w", id, err)
	}
	return u, nil
}

func getUser(ctx context.Context, db DB, sql, id string, args ...any) (User, error) {
	if err := checkID(id); err != nil {
		return User{}, err
	}
	rows, _ := db.Query(ctx, sql, append([]any{id}, args...)...)
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
	return u, translate(err)
}

const getUserByEmailSQL = `SELECT ` + userColumns + ` FROM users WHERE lower(email) = lower($1)`

// GetUserByEmail returns the user with that email (case-insensitively), or ErrNotFound.
func (s *Store) GetUserByEmail(ctx context.Context, email string) (User, error) {
	rows, _ := s.db.Query(ctx, getUserByEmailSQL, strings.TrimSpace(email))
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
	if err != nil {
		return User{}, fmt.Errorf("store: get user by email: %w", translate(err))
	}
	return u, nil
}

const setPasswordSQL = `UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1`

// SetPassword replaces a user's password and ends all of that user's sessions, with an
// audit row, in one transaction. It returns ErrNotFound, or ErrInvalid for an empty
// password.
func (s *Store) SetPassword(ctx context.Context, actor, id, password string) error {
	if password == "" {
		return fmt.Errorf("store: set password: %w: password is required", ErrInvalid)
	}
	if err := checkID(id); err != nil {
		return fmt.Errorf("store: set password %s: %w", id, err)
	}
	hash, err := s.hashPassword(ctx, password)
	if err != nil {
		return fmt.Errorf("store: set password %s: %w", id, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, setPasswordSQL, id, hash)
		if err != nil {
			return translate(err)
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		if _, err := tx.Exec(ctx, deleteUserSessionsSQL, id); err != nil {
			return translate(err)
		}
		return audit(ctx, tx, actor, ActionSetPassword, EntityUser, id, nil, nil)
	})
	if err != nil {
		return fmt.Errorf("store: set password %s: %w", id, err)
	}
	return nil
}

// lockAdminsSQL locks every admin row, in a fixed order and before any other user row,
// so concurrent demotions and deletions of different admins serialise (without
// deadlocking) and the last-admin check holds.
const lockAdminsSQL = `SELECT id::text FROM users WHERE role = 'admin' ORDER BY id FOR UPDATE`

func lockAdmins(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, _ := tx.Query(ctx, lockAdminsSQL)
	admins, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return admins, translate(err)
}

// errLastAdmin is returned when a write would leave no admin.
func errLastAdmin() error { return fmt.Errorf("%w: cannot remove the last admin", ErrConflict) }

const setRoleSQL = `UPDATE users SET role = $2, updated_at = now() WHERE id = $1 RETURNING ` + userColumns

// SetRole changes a user's role with an audit row. It returns ErrNotFound, ErrInvalid
// for an unknown role, and ErrConflict when it would demote the last admin.
func (s *Store) SetRole(ctx context.Context, actor, id, role string) (User, error) {
	if !isRole(role) {
		return User{}, fmt.Errorf("store: set role %s: %w: role must be %q or %q", id, ErrInvalid, RoleAdmin, RoleViewer)
	}
	var updated User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		admins, err := lockAdmins(ctx, tx)
		if err != nil {
			return err
		}
		cur, err := getUser(ctx, tx, getUserSQL+` FOR UPDATE`, id)
		if err != nil {
			return err
		}
		if cur.Role == RoleAdmin && role != RoleAdmin && len(admins) <= 1 {
			return errLastAdmin()
		}
		if updated, err = getUser(ctx, tx, setRoleSQL, id, role); err != nil {
			return err
		}
		return audit(ctx, tx, actor, ActionSetRole, EntityUser, id, cur, updated)
	})
	if err != nil {
		return User{}, fmt.Errorf("store: set role %s: %w", id, err)
	}
	return updated, nil
}

const deleteUserSQL = `DELETE FROM users WHERE id = $1`

// DeleteUser deletes a user and their sessions, with an audit row. It returns
// ErrNotFound, and ErrConflict when the user is the last admin.
func (s *Store) DeleteUser(ctx context.Context, actor, id string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		admins, err := lockAdmins(ctx, tx)
		if err != nil {
			return err
		}
		cur, err := getUser(ctx, tx, getUserSQL+` FOR UPDATE`, id)
		if err != nil {
			return err
		}
		if cur.Role == RoleAdmin && len(admins) <= 1 {
			return errLastAdmin()
		}
		if _, err := tx.Exec(ctx, deleteUserSQL, id); err != nil {
			return translate(err)
		}
		return audit(ctx, tx, actor, ActionDelete, EntityUser, id, cur, nil)
	})
	if err != nil {
		return fmt.Errorf("store: delete user %s: %w", id, err)
	}
	return nil
}

// isRole reports whether role is one the store accepts.
func isRole(role string) bool { return slices.Contains([]string{RoleAdmin, RoleViewer}, role) }
