package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConfigChannel is the NOTIFY channel on which every configuration write is announced.
const ConfigChannel = "gatehouse_config"

const notifySQL = `SELECT pg_notify($1, $2)`

// notifyConfig announces a configuration change; it is delivered when db's transaction
// commits, and not at all if it rolls back. The payload ("connection:<id>", "settings")
// is informational: listeners reload everything.
func notifyConfig(ctx context.Context, db DB, payload string) error {
	if _, err := db.Exec(ctx, notifySQL, ConfigChannel, payload); err != nil {
		return fmt.Errorf("store: notify: %w", translate(err))
	}
	return nil
}

// Reconnect backoff bounds for ListenConfig.
const (
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 30 * time.Second
)

const listenSQL = `LISTEN ` + ConfigChannel

// ListenConfig listens on ConfigChannel over a dedicated connection (not taken from the
// pool) and calls onChange once for every notification. onChange is also called each
// time the LISTEN is (re)established, the first time included, because changes made
// while no listener was connected are not delivered later: the caller should reload
// everything then. Lost connections are retried with exponential backoff (logged).
// onChange runs on the listening goroutine and should return quickly.
//
// ListenConfig returns nil once ctx is done; it returns no other error.
func (s *Store) ListenConfig(ctx context.Context, onChange func()) error {
	backoff := listenMinBackoff
	for {
		listening, err := s.listenOnce(ctx, onChange)
		if ctx.Err() != nil {
			return nil
		}
		if listening {
			backoff = listenMinBackoff
		}
		s.logger.Warn("config listener disconnected; reconnecting",
			slog.Any("error", err), slog.Duration("backoff", backoff))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, listenMaxBackoff)
	}
}

// listenOnce connects, LISTENs and dispatches notifications until the connection fails
// or ctx is done. listening reports whether LISTEN succeeded.
func (s *Store) listenOnce(ctx context.Context, onChange func()) (listening bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return false, fmt.Errorf("store: listen connect: %w", err)
	}
	defer func() {
		// ctx may be done already; give the goodbye message a short bound of its own.
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		return false, fmt.Errorf("store: listen: %w", err)
	}
	onChange()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return true, fmt.Errorf("store: wait for notification: %w", err)
		}
		onChange()
	}
}
