package store_test

import (
	"fmt"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/google/go-cmp/cmp"
)

// auditCount returns the number of audit rows.
func auditCount(t *testing.T, s *store.Store) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(t.Context(), `SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
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
		k, _, err := s.CreateClientKey(ctx, "tester", fmt.Sprintf("key-%d", i))
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
