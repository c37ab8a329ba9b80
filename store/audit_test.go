//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/google/go-cmp/cmp"
)

// auditCount returns the number of audit rows.
func auditCount(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := poolOf(t, s).QueryRow(t.Context(), `SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
		t.Fatalf("count audit rows: %v", err)
	}
	return n
}

func TestListAuditPaging(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	const n = 7
	var wantIDs []string // entity ids, newest first
	for i := range n {
		k, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput(fmt.Sprintf("key-%d", i)))
		if err != nil {
			t.Fatalf("CreateClientKey: %v", err)
		}
		wantIDs = append([]string{k.ID}, wantIDs...)
	}

	var (
		gotIDs   []string
		beforeID int64
		pages    int
	)
	for {
		page, err := s.ListAudit(ctx, beforeID, 3)
		if err != nil {
			t.Fatalf("ListAudit(%d, 3): %v", beforeID, err)
		}
		if len(page) == 0 {
			break
		}
		pages++
		if len(page) > 3 {
			t.Fatalf("page of %d entries, limit 3", len(page))
		}
		for _, e := range page {
			if beforeID != 0 && e.ID >= beforeID {
				t.Fatalf("entry id %d not below cursor %d", e.ID, beforeID)
			}
			beforeID = e.ID
			gotIDs = append(gotIDs, e.EntityID)
		}
	}
	if pages != 3 {
		t.Errorf("pages = %d, want 3", pages)
	}
	if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
		t.Errorf("audit entity ids, newest first, mismatch (-want +got):\n%s", diff)
	}

	all, err := s.ListAudit(ctx, 0, 0)
	if err != nil {
		t.Fatalf("ListAudit(0, 0): %v", err)
	}
	if len(all) != n {
		t.Errorf("ListAudit with default limit: %d entries, want %d", len(all), n)
	}
}

// TestListAuditFor: the filter narrows to one kind of entity and to one entity, in
// the database, newest first.
func TestListAuditFor(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	var keyIDs []string
	for i := range 3 {
		k, _, err := s.CreateClientKey(ctx, "tester", store.NewClientKeyInput(fmt.Sprintf("key-%d", i)))
		if err != nil {
			t.Fatalf("CreateClientKey: %v", err)
		}
		keyIDs = append(keyIDs, k.ID)
	}
	if _, _, err := s.CreateAPIToken(ctx, "tester", "tok", store.RoleViewer); err != nil {
		t.Fatalf("CreateAPIToken: %v", err)
	}
	if err := s.DeleteClientKey(ctx, "tester", keyIDs[0], 0); err != nil {
		t.Fatalf("DeleteClientKey: %v", err)
	}

	tests := []struct {
		name    string
		filter  store.AuditFilter
		limit   int
		wantIDs []string // entity ids, newest first
		wantAct []string
	}{
		{name: "one kind", filter: store.AuditFilter{Entity: store.EntityClientKey}, limit: 10,
			wantIDs: []string{keyIDs[0], keyIDs[2], keyIDs[1], keyIDs[0]},
			wantAct: []string{store.ActionDelete, store.ActionCreate, store.ActionCreate, store.ActionCreate}},
		{name: "one entity", filter: store.AuditFilter{Entity: store.EntityClientKey, EntityID: keyIDs[0]}, limit: 10,
			wantIDs: []string{keyIDs[0], keyIDs[0]},
			wantAct: []string{store.ActionDelete, store.ActionCreate}},
		{name: "newest only", filter: store.AuditFilter{Entity: store.EntityClientKey, EntityID: keyIDs[1]}, limit: 1,
			wantIDs: []string{keyIDs[1]}, wantAct: []string{store.ActionCreate}},
		{name: "none", filter: store.AuditFilter{Entity: store.EntityConnection}, limit: 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := s.ListAuditFor(ctx, tc.filter, 0, tc.limit)
			if err != nil {
				t.Fatalf("ListAuditFor: %v", err)
			}
			var ids, acts []string
			for _, e := range entries {
				ids, acts = append(ids, e.EntityID), append(acts, e.Action)
			}
			if diff := cmp.Diff(tc.wantIDs, ids); diff != "" {
				t.Errorf("entity ids mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAct, acts); diff != "" {
				t.Errorf("actions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAuditFiltersAndSignIns: sign-in attempts are audit rows (actor the account
// claimed, the address recorded, a typed e-mail that is not valid UTF-8 or holds a
// NUL stored cleaned, never refused); the filter narrows by actor (as recorded or by
// a user's e-mail), by action and by time.
func TestAuditFiltersAndSignIns(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	if _, _, err := s.CreateClientKey(ctx, "token:ci", store.NewClientKeyInput("k")); err != nil {
		t.Fatal(err)
	}
	u, err := s.CreateUser(ctx, store.ActorSystem, "ops@example.com", "correct horse battery", store.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []store.SignIn{
		{Action: store.ActionSignInFailed, Email: "ops@example.com", Address: "192.0.2.7"},
		{Action: store.ActionSignIn, Email: "ops@example.com", UserID: u.ID, Address: "192.0.2.7"},
		{Action: store.ActionSignInThrottled, Email: "x\x00y\xff@example.com", Address: "198.51.100.1"},
	} {
		if err := s.AuditSignIn(ctx, in); err != nil {
			t.Fatalf("AuditSignIn(%+v): %v", in, err)
		}
	}
	list := func(f store.AuditFilter) []string {
		t.Helper()
		entries, err := s.ListAuditFor(ctx, f, 0, 10)
		if err != nil {
			t.Fatalf("ListAuditFor(%+v): %v", f, err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Actor+" "+e.Action+" "+e.EntityID+" "+string(e.After))
		}
		return out
	}
	ops := "user:ops@example.com "
	if diff := cmp.Diff([]string{
		ops + "sign_in " + u.ID + ` {"email": "ops@example.com", "address": "192.0.2.7"}`,
		ops + `sign_in_failed  {"email": "ops@example.com", "address": "192.0.2.7"}`,
	}, list(store.AuditFilter{Actor: "ops@example.com"})); diff != "" {
		t.Errorf("by user e-mail mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`user:xy` + "\uFFFD" + `@example.com sign_in_throttled  {"email": "xy` + "\uFFFD" + `@example.com", "address": "198.51.100.1"}`},
		list(store.AuditFilter{Action: store.ActionSignInThrottled})); diff != "" {
		t.Errorf("by action mismatch (-want +got):\n%s", diff)
	}
	if got := list(store.AuditFilter{Actor: "token:ci"}); len(got) != 1 || !strings.HasPrefix(got[0], "token:ci create ") {
		t.Errorf("by recorded actor: %q", got)
	}
	if got := list(store.AuditFilter{Until: time.Now().Add(-time.Hour)}); len(got) != 0 {
		t.Errorf("until an hour ago: %q, want none", got)
	}
	if got := list(store.AuditFilter{Since: time.Now().Add(-time.Hour), Actor: "system"}); len(got) != 1 {
		t.Errorf("system since an hour ago: %q, want the user's creation", got)
	}
}
