package handlers

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestRequestsStatusClassStopsAtNextClass: ?status=4xx lists 400 to 499 and never
// the next class's first code (500), nor the previous class's last (399);
// ?status=5xx lists 500 and 599.
func TestRequestsStatusClassStopsAtNextClass(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	var rows []store.RequestRow
	for i, st := range []int{200, 399, 400, 499, 500, 599} {
		rows = append(rows, store.RequestRow{StartedAt: base.Add(time.Duration(i) * time.Second), Route: "chat",
			Model: "glm-5", Status: st, TTFTMs: -1})
	}
	if err := a.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	for _, tc := range []struct {
		query string
		want  []int
	}{
		{"status=4xx", []int{400, 499}},
		{"status=5xx", []int{500, 599}},
		{"status=3xx", []int{399}},
		{"status=500", []int{500}},
	} {
		page := a.do(t, call{method: http.MethodGet, path: path("requests") + "?" + tc.query}).want(t, http.StatusOK).json(t)
		var got []int
		for _, it := range page["items"].([]any) {
			got = append(got, int(it.(map[string]any)["status"].(float64)))
		}
		slices.Sort(got)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("?%s: statuses mismatch (-want +got):\n%s", tc.query, diff)
		}
	}
}

// TestRequestsStatusOutsideRangeIs400: a status that is neither a code of 100 to
// 599 nor a class 1xx to 5xx is a 400 naming the status field (42 is not a
// status, nor are 99 and 600); the bounds themselves are accepted.
func TestRequestsStatusOutsideRangeIs400(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	for _, v := range []string{"42", "99", "600", "0xx", "6xx", "4x"} {
		p := problemOf(t, a.do(t, call{method: http.MethodGet, path: path("requests") + "?status=" + v, invalidRequest: true}), http.StatusBadRequest)
		if diff := cmp.Diff([]string{"status"}, fields(p)); diff != "" {
			t.Errorf("?status=%s: fields mismatch (-want +got):\n%s", v, diff)
		}
	}
	for _, v := range []string{"100", "599", "1xx", "5XX"} {
		a.do(t, call{method: http.MethodGet, path: path("requests") + "?status=" + v}).want(t, http.StatusOK)
	}
}
