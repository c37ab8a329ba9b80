//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

func futureTime() time.Time { return time.Now().Add(time.Hour) }

func TestSessions(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	u := mustCreateUser(t, s, "sess@example.com", "pw", store.RoleViewer)

	if err := s.SaveSession(ctx, []byte("anon"), "", []byte("flash"), futureTime()); err != nil {
		t.Fatalf("SaveSession(anonymous): %v", err)
	}
	if err := s.SaveSession(ctx, []byte("live"), u.ID, []byte("v1"), futureTime()); err != nil {
		t.Fatalf("SaveSession: %v", err)
	}
	if err := s.SaveSession(ctx, []byte("live"), u.ID, []byte("v2"), futureTime()); err != nil {
		t.Fatalf("SaveSession (replace): %v", err)
	}
	if err := s.SaveSession(ctx, []byte("old"), u.ID, []byte("x"), time.Now().Add(-time.Second)); err != nil {
		t.Fatalf("SaveSession(expired): %v", err)
	}

	for _, tc := range []struct {
		name     string
		id       string
		wantData string
		wantUser string
		wantErr  error
	}{
		{name: "anonymous", id: "anon", wantData: "flash"},
		{name: "replaced", id: "live", wantData: "v2", wantUser: u.ID},
		{name: "expired", id: "old", wantErr: store.ErrNotFound},
		{name: "unknown", id: "nope", wantErr: store.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, userID, err := s.LoadSession(ctx, []byte(tc.id))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("LoadSession: err = %v, want %v", err, tc.wantErr)
			}
			if string(data) != tc.wantData || userID != tc.wantUser {
				t.Errorf("LoadSession = %q, %q; want %q, %q", data, userID, tc.wantData, tc.wantUser)
			}
		})
	}

	n, err := s.DeleteExpiredSessions(ctx)
	if err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions = %d, %v; want 1", n, err)
	}
	if err := s.DeleteSession(ctx, []byte("anon")); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	if _, _, err := s.LoadSession(ctx, []byte("anon")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LoadSession after delete: err = %v, want ErrNotFound", err)
	}
	if err := s.DeleteUserSessions(ctx, u.ID); err != nil {
		t.Fatalf("DeleteUserSessions: %v", err)
	}
	if _, _, err := s.LoadSession(ctx, []byte("live")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LoadSession after DeleteUserSessions: err = %v, want ErrNotFound", err)
	}
	if err := s.SaveSession(ctx, []byte("ghost"), "00000000-0000-4000-8000-000000000000", nil, futureTime()); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SaveSession for an unknown user: err = %v, want ErrNotFound", err)
	}
}
