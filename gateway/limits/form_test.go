package limits

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestApplyForm(t *testing.T) {
	t.Parallel()
	base := Overrides{MaxConcurrent: new(4), ModelConcurrency: map[string]int{"glm-5": 1}, RPD: new(500), TPD: new(int64(1e9))}
	tests := []formCase{
		{name: "absent fields keep API-set keys", form: url.Values{"name": {"zai-main"}}, want: base},
		{
			name: "present fields set, blank fields remove",
			form: url.Values{"maxConcurrent": {" 8 "}, "rpd": {""}, "executionMaxWaitMs": {"300000"}, "modelConcurrency": {"glm-5=2\r\nglm-4.7=3\r\n"}},
			want: Overrides{MaxConcurrent: new(8), ModelConcurrency: map[string]int{"glm-5": 2, "glm-4.7": 3}, ExecutionMaxWaitMs: new(300000), TPD: new(int64(1e9))},
		},
		{name: "blank textarea removes every model cap", form: url.Values{"modelConcurrency": {"  \r\n"}}, want: Overrides{MaxConcurrent: new(4), RPD: new(500), TPD: new(int64(1e9))}},
		{
			name: "every problem reported",
			form: url.Values{"maxWaitMs": {"abc"}, "rpm": {"1.5"}, "minTime": {`1,"x":2`}, "maxQueueDepth": {"-1"}, "modelConcurrency": {"glm-5=0\nok=1\nbad"}},
			wantErrs: FieldErrors{
				{Field: "rateLimitOverrides.maxQueueDepth", Message: "must be a whole number from 0 to 100000"},
				{Field: "rateLimitOverrides.maxWaitMs", Message: "must be a whole number from 0 to 120000"},
				{Field: "rateLimitOverrides.minTime", Message: "must be a whole number from 0 to 60000"},
				{Field: "rateLimitOverrides.modelConcurrency", Message: `line 1: "glm-5=0": cap must be a whole number from 1 to 10000`},
				{Field: "rateLimitOverrides.modelConcurrency", Message: `line 3: "bad": expected model=cap, like glm-5=2`},
				{Field: "rateLimitOverrides.rpm", Message: "must be a whole number from 0 to 1000000"},
			},
		},
	}
	runFormCases(t, base, tests)
}

// formCase is one dashboard form applied to a connection's overrides: the
// overrides it leaves, or the problems it reports.
type formCase struct {
	name     string
	form     url.Values
	want     Overrides
	wantErrs FieldErrors
}

// runFormCases applies each case's form to a copy of base and compares.
func runFormCases(t *testing.T, base Overrides, tests []formCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := ApplyForm(base.Clone(), tt.form, prefix)
			if diff := cmp.Diff(tt.wantErrs, errs, ignoreCodes); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("overrides mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
