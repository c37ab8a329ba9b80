package handlers

import (
	"encoding/csv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/handlers/ui"
	"github.com/gatehouse-dev/gatehouse/store"
)

// TestRequestsCSVStreamsEveryRowAndQuotesFormulas: /requests.csv over 2 345 rows of a
// filter gives all of them (no 1 000 cap), and every cell that starts with =, +, -,
// @, a tab or a carriage return comes with a leading ' — "-1+1" too.
func TestRequestsCSVStreamsEveryRowAndQuotesFormulas(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	key := d.createKey(t, "team-csv", `{}`)
	models := []string{"=HYPERLINK(\"http://x\")", "+1", "-1+1", "-2", "@SUM(A1)", "\tx", "\rx", "glm-5"}
	now := time.Now().UTC()
	const n = 2345
	rows := make([]store.RequestRow, n)
	for i := range rows {
		rows[i] = store.RequestRow{StartedAt: now.Add(-time.Duration(i) * time.Millisecond), KeyID: key.ID, KeyName: "team-csv",
			Model: models[i%len(models)], Route: "chat", Status: 200, TTFTMs: -1}
	}
	if err := d.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	other := []store.RequestRow{{StartedAt: now, KeyName: "someone-else", Model: "glm-5", Route: "chat", Status: 200, TTFTMs: -1}}
	if err := d.store.WriteRequests(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	c := d.signIn(t, "viewer@example.com")
	res := d.get(t, c, "/requests.csv?key=team-csv").want(t, http.StatusOK)
	recs, err := csv.NewReader(strings.NewReader(res.body)).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v", err)
	}
	if len(recs) != n+1 {
		t.Fatalf("CSV has %d rows after its header, want every one of the %d", len(recs)-1, n)
	}
	col := -1
	for i, h := range recs[0] {
		if h == "model" {
			col = i
		}
	}
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, r := range recs[1:] {
		seen[r[col]]++
		ids[r[0]] = true
	}
	if len(ids) != n {
		t.Errorf("%d distinct ids, want %d (no row twice across pages)", len(ids), n)
	}
	want := map[string]int{}
	for i := range n {
		m := models[i%len(models)]
		if m != "glm-5" {
			m = "'" + m
		}
		want[m]++
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("model cells mismatch (-want +got):\n%s", diff)
	}
}

func TestCSVCell(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"=1": "'=1", "+1": "'+1", "-1": "'-1", "-1+1": "'-1+1", "@a": "'@a",
		"\tx": "'\tx", "\rx": "'\rx", "": "", "a=b": "a=b", "1": "1", "x-1": "x-1"} {
		if got := ui.CSVCell(in); got != want {
			t.Errorf("csvCell(%q) = %q, want %q", in, got, want)
		}
	}
}
