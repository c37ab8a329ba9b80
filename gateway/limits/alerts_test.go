package limits

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeSettingsAlerts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want []string // "field: message" of each problem
	}{
		{name: "valid", doc: `{"alerts":[{"name":"ops","url":"https://hooks.example.com/x","format":"slack","events":["budget.threshold","session.guard"],"secret":"s3"}],"alertCooldownMs":60000}`},
		{name: "field paths", doc: `{"alerts":[{"name":"","url":"ftp://x","format":"xml","events":["nope"]}]}`, want: []string{
			"alerts.0.events.0: must be one of: budget.threshold, connection.health, capacity.learned_cut, session.guard, requestlog.dropped, cluster.degraded",
			"alerts.0.format: must be one of: slack, json",
			"alerts.0.name: is required",
			"alerts.0.url: must be an absolute http(s) URL",
		}},
		{name: "duplicate name", doc: `{"alerts":[{"name":"a","url":"http://h","format":"json","events":["cluster.degraded"]},{"name":"a","url":"http://h","format":"json","events":["cluster.degraded"]}]}`,
			want: []string{"alerts.1.name: must not contain duplicates"}},
		{name: "unknown field", doc: `{"alerts":[{"name":"a","url":"http://h","format":"json","events":["cluster.degraded"],"color":1}]}`,
			want: []string{`alerts.0: unknown field "color"`}},
		{name: "cooldown range", doc: `{"alertCooldownMs":5}`, want: []string{"alertCooldownMs: must be a whole number from 1000 to 86400000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, fe := DecodeSettings([]byte(tt.doc), "")
			var got []string
			for _, e := range fe {
				got = append(got, e.Field+": "+e.Message)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeSettingsAlertsTooMany(t *testing.T) {
	t.Parallel()
	doc := `{"alerts":[`
	for i := range MaxAlertWebhooks + 1 {
		if i > 0 {
			doc += ","
		}
		doc += `{"name":"w` + string(rune('a'+i)) + `","url":"http://h","format":"json","events":["cluster.degraded"]}`
	}
	_, fe := DecodeSettings([]byte(doc+`]}`), "")
	if len(fe) != 1 || fe[0].Field != "alerts" {
		t.Fatalf("problems = %v, want one at alerts", fe)
	}
}
