//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// waitSignal waits for one value on ch, failing the test after a deadline.
func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// expectQuiet fails if ch yields a value right away: no call is pending.
func expectQuiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("unexpected %s", what)
	default:
	}
}

func TestListenConfig(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	changes := make(chan struct{}, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.ListenConfig(ctx, func() { changes <- struct{}{} })
	}()
	waitSignal(t, changes, "the call after LISTEN is established")

	c := mustCreateConnection(t, s, connInput("notified"))
	waitSignal(t, changes, "the notification of CreateConnection")

	if _, err := s.UpdateConnection(ctx, "tester", c.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
		in := cur.Input()
		in.Priority = 1
		return in, nil
	}); err != nil {
		t.Fatalf("UpdateConnection: %v", err)
	}
	waitSignal(t, changes, "the notification of UpdateConnection")

	// A rolled-back write announces nothing: the NOTIFY is part of the transaction.
	if _, err := s.UpdateConnection(ctx, "tester", c.ID, 999, func(cur store.Connection) (store.ConnectionInput, error) {
		return cur.Input(), nil
	}); err == nil {
		t.Fatal("stale UpdateConnection succeeded")
	}
	if _, err := s.UpdateSettings(ctx, "tester", 0, func(store.Settings) (json.RawMessage, error) {
		return json.RawMessage(`{"maxAttempts": 2}`), nil
	}); err != nil {
		t.Fatalf("UpdateSettings: %v", err)
	}
	waitSignal(t, changes, "the notification of UpdateSettings")
	// Notifications arrive in commit order, so the failed update would have come first.
	expectQuiet(t, changes, "notification (a rolled-back write must not notify)")

	// Kill the listener's backend: ListenConfig must reconnect and call onChange,
	// since changes made meanwhile were not delivered.
	tag, err := poolOf(t, s).Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+store.ConfigChannel+`'`)
	if err != nil {
		t.Fatalf("terminate listener: %v", err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("terminated %d listener backends, want 1", tag.RowsAffected())
	}
	waitSignal(t, changes, "the call after reconnecting")

	if _, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput("after-reconnect")); err != nil {
		t.Fatalf("CreateClientKey: %v", err)
	}
	waitSignal(t, changes, "the notification of CreateClientKey after reconnecting")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenConfig returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenConfig did not return after cancel")
	}
}
