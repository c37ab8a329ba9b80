package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestListRequestsStatusClassBounds: a status class filter lists its hundred
// codes and neither neighbour's edge: 4 is 400 to 499, not 399 and not 500.
func TestListRequestsStatusClassBounds(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	var rows []store.RequestRow
	for i, st := range []int{200, 399, 400, 499, 500, 599} {
		rows = append(rows, store.RequestRow{StartedAt: base.Add(time.Duration(i) * time.Second), Route: "chat",
			Model: "glm-5", Status: st, TTFTMs: -1})
	}
	if err := s.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	for _, tc := range []struct {
		class int
		want  []int
	}{{3, []int{399}}, {4, []int{400, 499}}, {5, []int{500, 599}}} {
		page, _, err := s.ListRequests(t.Context(), store.RequestFilter{StatusClass: tc.class})
		if err != nil {
			t.Fatalf("ListRequests: %v", err)
		}
		var got []int
		for _, r := range page {
			got = append(got, r.Status)
		}
		slices.Sort(got)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("status class %dxx mismatch (-want +got):\n%s", tc.class, diff)
		}
	}
}
