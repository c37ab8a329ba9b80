//go:build !mutate

// Left out of store's mutation runs (scripts/mutate builds with the tag
// mutate): none of its tests is in their -run set.

package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// The cost ranking folds an alias and provider/model into the upstream's model,
// keeps "no model" apart, and sums by provider, connection and key.
func TestCostRankingFoldsModels(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	at := time.Now().UTC().Add(-time.Minute)
	conn, key := "33333333-3333-4333-8333-333333333333", "11111111-1111-4111-8111-111111111111"
	row := func(model, upstream string, cost int64) store.RequestRow {
		r := store.RequestRow{StartedAt: at, KeyID: key, KeyName: "team-a", Model: model, Route: "chat",
			Status: 200, Attempts: 1, TTFTMs: -1, CostMicros: cost}
		if upstream != "" {
			r.UpstreamModel, r.Provider, r.ConnectionID, r.ConnectionName = upstream, "zai", conn, "zai-main"
		}
		return r
	}
	rows := []store.RequestRow{
		row("glm", "glm-4.7", 100),         // an alias
		row("zai/glm-4.7", "glm-4.7", 200), // provider/model
		row("glm-4.7", "glm-4.7", 300),
		row("zai/glm-5", "", 0), // refused before routing: folded by its name
		row("glm-5", "glm-5", 50),
		row("", "", 0), // no model
	}
	if err := s.WriteRequests(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	got, err := s.CostRanking(t.Context(), at.Add(-time.Hour), at.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	find := func(group, name string) store.CostRow {
		i := slices.IndexFunc(got, func(c store.CostRow) bool { return c.Group == group && c.Name == name })
		if i < 0 {
			t.Fatalf("no %s %q in %+v", group, name, got)
		}
		return got[i]
	}
	if c := find("model", "glm-4.7"); c.Requests != 3 || c.CostMicros != 600 {
		t.Errorf("glm-4.7 = %+v, want 3 requests, 600 µ$", c)
	}
	if c := find("model", "glm-5"); c.Requests != 2 || c.CostMicros != 50 {
		t.Errorf("glm-5 = %+v, want 2 requests, 50 µ$", c)
	}
	if c := find("model", ""); c.Requests != 1 {
		t.Errorf("no model = %+v, want 1 request", c)
	}
	if c := find("provider", "zai"); c.Requests != 4 || c.CostMicros != 650 {
		t.Errorf("zai = %+v, want 4 requests, 650 µ$", c)
	}
	if c := find("connection", "zai-main"); c.ID != conn || c.CostMicros != 650 {
		t.Errorf("connection = %+v", c)
	}
	if c := find("key", "team-a"); c.ID != key || c.Requests != 6 || c.CostMicros != 650 {
		t.Errorf("key = %+v", c)
	}
}
