//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestUpdateConnectionRename(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	mustCreateConnection(t, s, connInput("one"))
	two := mustCreateConnection(t, s, connInput("two"))
	_, err := s.UpdateConnection(t.Context(), "tester", two.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
		in := cur.Input()
		in.Name = "one"
		return in, nil
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("rename onto a taken name: err = %v, want ErrConflict", err)
	}
}

func TestUpdateConnectionStale(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("stale"))
	auditBefore := auditCount(t, s)

	called := false
	_, err := s.UpdateConnection(ctx, "tester", c.ID, c.Version+1, func(cur store.Connection) (store.ConnectionInput, error) {
		called = true
		in := cur.Input()
		in.Priority = 99
		return in, nil
	})
	if !errors.Is(err, store.ErrStale) {
		t.Fatalf("UpdateConnection with a wrong version: err = %v, want ErrStale", err)
	}
	if called {
		t.Error("UpdateConnection called fn despite the stale version")
	}
	if err := s.DeleteConnection(ctx, "tester", c.ID, c.Version+1); !errors.Is(err, store.ErrStale) {
		t.Errorf("DeleteConnection with a wrong version: err = %v, want ErrStale", err)
	}
	got, err := s.GetConnection(ctx, c.ID)
	if err != nil {
		t.Fatalf("GetConnection: %v", err)
	}
	if diff := cmp.Diff(c, got, cmpopts.IgnoreFields(store.Connection{}, "RateLimitOverrides")); diff != "" {
		t.Errorf("row changed by stale writes (-want +got):\n%s", diff)
	}
	if n := auditCount(t, s); n != auditBefore {
		t.Errorf("audit rows = %d, want %d (stale writes must not audit)", n, auditBefore)
	}
}

func TestUpdateConnectionFnError(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	c := mustCreateConnection(t, s, connInput("fn-error"))
	fnErr := errors.New("validation failed")
	_, err := s.UpdateConnection(t.Context(), "tester", c.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
		return store.ConnectionInput{}, fnErr
	})
	if err != fnErr { // fn's error must come back unwrapped, not wrapped
		t.Errorf("err = %v, want fn's error unchanged", err)
	}
	got, err := s.GetConnection(t.Context(), c.ID)
	if err != nil {
		t.Fatalf("GetConnection: %v", err)
	}
	if got.Version != c.Version {
		t.Errorf("version = %d, want %d (nothing written)", got.Version, c.Version)
	}
}

func TestUpdateConnectionAPIKey(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("rekey"))
	const newKey = "sk-ant-brand-new-key-0a1b"
	updated, err := s.UpdateConnection(ctx, "tester", c.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
		in := cur.Input()
		in.APIKey = newKey
		return in, nil
	})
	if err != nil {
		t.Fatalf("UpdateConnection: %v", err)
	}
	if updated.APIKeyPreview != "sk-…0a1b" {
		t.Errorf("APIKeyPreview = %q, want %q", updated.APIKeyPreview, "sk-…0a1b")
	}
	secrets, err := s.ConnectionSecrets(ctx)
	if err != nil {
		t.Fatalf("ConnectionSecrets: %v", err)
	}
	if diff := cmp.Diff(map[string]string{c.ID: newKey}, secrets); diff != "" {
		t.Errorf("ConnectionSecrets mismatch (-want +got):\n%s", diff)
	}
}

func TestConcurrentUpdatesBothSurvive(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	c := mustCreateConnection(t, s, connInput("concurrent"))

	edits := []func(*store.ConnectionInput){
		func(in *store.ConnectionInput) { in.Priority = 42 },
		func(in *store.ConnectionInput) { in.Enabled = false },
		func(in *store.ConnectionInput) { in.BaseURL = "https://example.test/v1" },
		func(in *store.ConnectionInput) { in.Models = append(in.Models, "glm-9") },
	}
	var wg sync.WaitGroup
	errs := make([]error, len(edits))
	for i, edit := range edits {
		wg.Go(func() {
			_, errs[i] = s.UpdateConnection(ctx, "tester", c.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
				in := cur.Input()
				edit(&in)
				return in, nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("update %d: %v", i, err)
		}
	}
	got, err := s.GetConnection(ctx, c.ID)
	if err != nil {
		t.Fatalf("GetConnection: %v", err)
	}
	if got.Priority != 42 || got.Enabled || got.BaseURL != "https://example.test/v1" ||
		!slices.Equal(got.Models, []string{"glm-5", "glm-4.7", "glm-9"}) {
		t.Errorf("after concurrent updates: %+v, want every edit applied", got)
	}
	if want := c.Version + int64(len(edits)); got.Version != want {
		t.Errorf("version = %d, want %d", got.Version, want)
	}
}
