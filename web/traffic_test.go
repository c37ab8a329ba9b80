package web

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuildTraffic: the last minute sums per connection, per key and in total, the
// errors by status and code most first (2xx are requests, not errors); today's
// spend per connection and key; every stored connection gets a line; keys sort
// busiest first and are named.
func TestBuildTraffic(t *testing.T) {
	t.Parallel()
	got := BuildTraffic(TrafficInput{
		Now: testNow,
		Recent: []TrafficCount{
			{Status: 401, Code: "INVALID_API_KEY", Requests: 3},
			{KeyID: "k1", Status: 404, Code: "MODEL_NOT_FOUND", Requests: 2},
			{ConnectionID: "c1", KeyID: "k1", Status: 200, Requests: 5},
			{ConnectionID: "c1", KeyID: "k2", Status: 502, Requests: 1, UpstreamFailures: 1},
		},
		Today:         []DayTotal{{KeyID: "k1", ConnectionID: "c1", Requests: 5, Tokens: 900, CostMicros: 60}},
		KeyNames:      map[string]string{"k1": "team-a"},
		ConnectionIDs: []string{"c1", "c2"},
	})
	wantTotal := TrafficLine{PerMinute: 11, ErrorTotal: 6, UpstreamFailures: 1, TokensToday: 900, CostTodayMicros: 60,
		Errors: []CodeCount{{401, "INVALID_API_KEY", 3}, {404, "MODEL_NOT_FOUND", 2}, {502, "", 1}}}
	if diff := cmp.Diff(wantTotal, got.Total); diff != "" {
		t.Errorf("total mismatch (-want +got):\n%s", diff)
	}
	wantConns := map[string]TrafficLine{
		"c1": {PerMinute: 6, ErrorTotal: 1, UpstreamFailures: 1, TokensToday: 900, CostTodayMicros: 60, Errors: []CodeCount{{502, "", 1}}},
		"c2": {},
	}
	if diff := cmp.Diff(wantConns, got.Connections); diff != "" {
		t.Errorf("connections mismatch (-want +got):\n%s", diff)
	}
	wantKeys := []KeyTraffic{
		{ID: "k1", Name: "team-a", TrafficLine: TrafficLine{PerMinute: 7, ErrorTotal: 2, TokensToday: 900, CostTodayMicros: 60,
			Errors: []CodeCount{{404, "MODEL_NOT_FOUND", 2}}}},
		{ID: "k2", Name: "k2", TrafficLine: TrafficLine{PerMinute: 1, ErrorTotal: 1, UpstreamFailures: 1, Errors: []CodeCount{{502, "", 1}}}},
	}
	if diff := cmp.Diff(wantKeys, got.Keys); diff != "" {
		t.Errorf("keys mismatch (-want +got):\n%s", diff)
	}
	if u := got.errorsURL(CodeCount{Status: 404, Code: "MODEL_NOT_FOUND"}, "key", "k1"); u != "/requests?code=MODEL_NOT_FOUND&key=k1&since=2026-03-01T11%3A59%3A00Z&status=404" {
		t.Errorf("errorsURL = %q", u)
	}
}

// TestTrafficErrorsColon: the errors of the last minute introduce their codes with a
// colon right after the words ("minute: 3 × 401 …", no space before it), in the
// summary and on a connection, in English and Portuguese.
func TestTrafficErrorsColon(t *testing.T) {
	t.Parallel()
	tr := BuildTraffic(TrafficInput{Now: testNow, ConnectionIDs: []string{"c1"},
		Recent: []TrafficCount{{ConnectionID: "c1", Status: 401, Code: "INVALID_API_KEY", Requests: 3}}})
	for _, tt := range []struct{ lang, part, want string }{
		{"en", "sum-errors", "3 errors in the last minute: 3 × 401"},
		{"en", "conn-c1", "3 errors in the last minute: 3 × 401"},
		{"pt-BR", "sum-errors", "erros no último minuto: 3 × 401"},
	} {
		doc := render(t, TrafficFragments(testPage(tt.lang, RoleViewer), tr)[tt.part])
		got := strings.Join(strings.Fields(doc.Text()), " ")
		if !strings.Contains(got, tt.want) || strings.Contains(got, " :") {
			t.Errorf("%s %s = %q, want it to hold %q and no space before a colon", tt.lang, tt.part, got, tt.want)
		}
	}
}
