//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
)

func TestSettings(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()

	cur, err := s.GetSettings(ctx)
	if err != nil {
		t.Fatalf("GetSettings: %v", err)
	}
	if cur.Version != 1 || string(cur.Data) != "{}" {
		t.Fatalf("initial settings = %+v, want {} at version 1", cur)
	}

	newData := json.RawMessage(`{"globalMaxConcurrent": 16, "providers": {"zai": {"maxConcurrent": 4}}}`)
	updated, err := s.UpdateSettings(ctx, "alice", 1, func(got store.Settings) (json.RawMessage, error) {
		if got.Version != 1 {
			t.Errorf("fn got version %d, want 1", got.Version)
		}
		return newData, nil
	})
	if err != nil {
		t.Fatalf("UpdateSettings: %v", err)
	}
	if updated.Version != 2 || !jsonEqual(t, newData, updated.Data) {
		t.Errorf("updated = %+v, want version 2 and the new data", updated)
	}

	entries, err := s.ListAudit(ctx, 0, 10)
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	if len(entries) != 1 {
		t.Fatalf("audit entries = %d, want 1", len(entries))
	}
	e := entries[0]
	if e.Actor != "alice" || e.Entity != store.EntitySettings || e.Action != store.ActionUpdate ||
		!jsonEqual(t, []byte("{}"), e.Before) || !jsonEqual(t, newData, e.After) {
		t.Errorf("audit entry = %+v, want alice's settings update from {} to the new data", e)
	}

	for _, tc := range []struct {
		name    string
		version int64
		data    string
		want    error
	}{
		{name: "stale", version: 1, data: `{}`, want: store.ErrStale},
		{name: "not an object", version: 0, data: `[]`, want: store.ErrInvalid},
		{name: "not JSON", version: 0, data: `{`, want: store.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.UpdateSettings(ctx, "alice", tc.version, func(store.Settings) (json.RawMessage, error) {
				return json.RawMessage(tc.data), nil
			})
			if !errors.Is(err, tc.want) {
				t.Errorf("UpdateSettings: err = %v, want %v", err, tc.want)
			}
		})
	}

	fnErr := errors.New("invalid settings")
	if _, err := s.UpdateSettings(ctx, "alice", 0, func(store.Settings) (json.RawMessage, error) {
		return nil, fnErr
	}); err != fnErr {
		t.Errorf("UpdateSettings with failing fn: err = %v, want fn's error unchanged", err)
	}
	got, err := s.GetSettings(ctx)
	if err != nil {
		t.Fatalf("GetSettings: %v", err)
	}
	if got.Version != 2 {
		t.Errorf("version after failed updates = %d, want 2", got.Version)
	}
}
