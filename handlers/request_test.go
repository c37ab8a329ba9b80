package handlers

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// TestRequestsAPIFiltersAndPages writes a log and reads it back through the API:
// filters, keyset pages that neither skip nor repeat a row, and bad parameters
// named in the problem.
func TestRequestsAPIFiltersAndPages(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	keyA, keyB := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	var rows []store.RequestRow
	for i := range 30 {
		r := store.RequestRow{StartedAt: base.Add(time.Duration(i/2) * time.Second), KeyID: keyA, KeyName: "team-a",
			Route: "chat", Model: "glm-5", Status: 200, TTFTMs: -1, CostMicros: 1500}
		if i%3 == 0 {
			r.KeyID, r.KeyName, r.Status, r.Code, r.CostMicros = keyB, "team-b", 403, "MODEL_NOT_ALLOWED", 0
			r.Session, r.Affinity = "0123456789abcdef", "hit"
		}
		rows = append(rows, r)
	}
	if err := a.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}

	// Pages of 7 over the 30 rows (pairs share a started_at: the id breaks ties).
	var seen []string
	cursor := ""
	for range 10 {
		p := path("requests") + "?limit=7"
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		page := a.do(t, call{method: http.MethodGet, path: p, token: a.viewer}).want(t, http.StatusOK).json(t)
		for _, it := range page["items"].([]any) {
			seen = append(seen, it.(map[string]any)["id"].(string))
		}
		cursor, _ = page["nextCursor"].(string)
		if cursor == "" {
			break
		}
	}
	want := make([]string, 0, len(rows))
	slices.SortFunc(rows, func(x, y store.RequestRow) int {
		if c := y.StartedAt.Compare(x.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(y.ID, x.ID)
	})
	for _, r := range rows {
		want = append(want, r.ID)
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("paged ids mismatch (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		query string
		want  int
	}{
		{"key=" + keyB, 10},
		{"key=team-a&status=200", 20},
		{"status=4xx&code=MODEL_NOT_ALLOWED", 10},
		{"model=glm-5&limit=1000", 30},
		{"session=0123456789abcdef", 10},
		{"session=0123456789ABCDEF&status=200", 0},
		{fmt.Sprintf("since=%s&until=%s", base.Add(5*time.Second).Format(time.RFC3339), base.Add(10*time.Second).Format(time.RFC3339)), 10},
	} {
		page := a.do(t, call{method: http.MethodGet, path: path("requests") + "?" + tc.query}).want(t, http.StatusOK).json(t)
		if got := len(page["items"].([]any)); got != tc.want {
			t.Errorf("?%s: %d items, want %d", tc.query, got, tc.want)
		}
	}

	one := a.do(t, call{method: http.MethodGet, path: path("requests", rows[0].ID)}).want(t, http.StatusOK).json(t)
	if one["ttftMs"] != nil || one["connectionId"] != nil || one["id"] != rows[0].ID || one["session"] != orNil(rows[0].Session) {
		t.Errorf("GET one: %v, want its id and null ttftMs and connectionId", one)
	}
	a.do(t, call{method: http.MethodGet, path: path("requests", "not-a-uuid")}).want(t, http.StatusNotFound)

	for _, tc := range []struct {
		query  string
		fields []string
	}{
		{"status=abc&limit=0", []string{"status", "limit"}},
		{"since=tomorrow", []string{"since"}},
		{"since=2030-01-02T00:00:00Z&until=2030-01-01T00:00:00Z", []string{"until"}},
		{"cursor=bm9wZQ", []string{"cursor"}},
		{"session=not-a-session", []string{"session"}},
	} {
		p := problemOf(t, a.do(t, call{method: http.MethodGet, path: path("requests") + "?" + tc.query, invalidRequest: true}), http.StatusBadRequest)
		if diff := cmp.Diff(tc.fields, fields(p)); diff != "" {
			t.Errorf("?%s: fields mismatch (-want +got):\n%s", tc.query, diff)
		}
	}

	usage := a.do(t, call{method: http.MethodGet, path: path("usage") + "?groupBy=key&bucket=day"}).want(t, http.StatusOK).json(t)
	got := map[string][2]int64{} // requests, cost in micros
	for _, r := range usage["rows"].([]any) {
		m := r.(map[string]any)
		v := got[m["group"].(string)]
		got[m["group"].(string)] = [2]int64{v[0] + int64(m["requests"].(float64)), v[1] + int64(math.Round(m["costUsd"].(float64)*1e6))}
	}
	if diff := cmp.Diff(map[string][2]int64{"team-a": {20, 30000}, "team-b": {10, 0}}, got); diff != "" {
		t.Errorf("usage by key (requests, costUsd) mismatch (-want +got):\n%s", diff)
	}
	bad := problemOf(t, a.do(t, call{method: http.MethodGet, path: path("usage") + "?groupBy=secret&bucket=week", invalidRequest: true}), http.StatusBadRequest)
	if diff := cmp.Diff([]string{"groupBy", "bucket"}, fields(bad)); diff != "" {
		t.Errorf("bad usage query: fields mismatch (-want +got):\n%s", diff)
	}
	a.do(t, call{method: http.MethodGet, path: path("usage"), token: noToken}).want(t, http.StatusUnauthorized)
}

// orNil is s as the API shows it: null when empty.
func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}
