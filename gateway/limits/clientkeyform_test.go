package limits

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestApplyClientKeyForm(t *testing.T) {
	t.Parallel()
	base := ClientKeyLimits{Weight: new(3), MaxConcurrent: new(8), TPD: new(int64(1e9)), Models: []string{"glm-5"}}
	pattern := "model must be 1 to 128 characters — provider/model, a bare model id or provider/* — with no spaces, '=' or ','"
	tests := []struct {
		name     string
		form     url.Values
		want     ClientKeyLimits
		wantErrs FieldErrors
	}{
		{name: "absent fields keep API-set keys", form: url.Values{"name": {"team-a"}}, want: base},
		{
			name: "present fields set, blank fields remove",
			form: url.Values{"weight": {" 5 "}, "maxConcurrent": {""}, "rpm": {"60"}, "tpm": {"1e5"}, "models": {"zai/*\r\n\r\n openai/gpt-4o \r\nglm-5"}},
			want: ClientKeyLimits{Weight: new(5), RPM: new(60), TPM: new(int64(1e5)), TPD: new(int64(1e9)), Models: []string{"zai/*", "openai/gpt-4o", "glm-5"}},
		},
		{name: "blank weight is the default, blank models all", form: url.Values{"weight": {""}, "models": {" \n "}},
			want: ClientKeyLimits{MaxConcurrent: new(8), TPD: new(int64(1e9))}},
		{
			name: "every problem reported",
			form: url.Values{"weight": {"0"}, "maxConcurrent": {"abc"}, "maxWaitMs": {"1.5"}, "rpm": {"-1"}, "tpm": {`1,"x":2`}, "tpd": {"1e11"},
				"models": {"ok\na b\nzai/x*\nok"}},
			wantErrs: FieldErrors{
				{Field: "limits.maxConcurrent", Message: "must be a whole number from 0 to 10000"},
				{Field: "limits.maxWaitMs", Message: "must be a whole number from 0 to 120000"},
				{Field: "limits.models", Message: `line 2: "a b": ` + pattern},
				{Field: "limits.models", Message: `line 3: "zai/x*": ` + pattern},
				{Field: "limits.models", Message: `line 4: "ok": model "ok" is already listed on line 1`},
				{Field: "limits.rpm", Message: "must be a whole number from 0 to 1000000"},
				{Field: "limits.tpd", Message: "must be a whole number from 0 to 10000000000"},
				{Field: "limits.tpm", Message: "must be a whole number from 0 to 100000000"},
				{Field: "limits.weight", Message: "must be a whole number from 1 to 1000"},
			},
		},
		{name: "too many models", form: url.Values{"models": {strings.Join(modelList(501), "\n")}},
			wantErrs: FieldErrors{{Field: "limits.models", Message: "must have at most 500 items"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := ApplyClientKeyForm(base.Clone(), tt.form, "limits")
			if diff := cmp.Diff(tt.wantErrs, errs, ignoreCodes); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("limits mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelListRoundTrip(t *testing.T) {
	t.Parallel()
	for _, models := range [][]string{nil, {"glm-5"}, {"zai/*", "openai/gpt-4o", "glm-5"}, modelList(500)} {
		got, errs := ParseModelList(FormatModelList(models))
		if errs != nil {
			t.Fatalf("ParseModelList(FormatModelList(%q)) errors: %v", models, errs)
		}
		if diff := cmp.Diff(models, got); diff != "" {
			t.Errorf("round trip mismatch (-want +got):\n%s", diff)
		}
	}
	if _, errs := ParseModelList("a\n\nb\na"); len(errs) != 1 || errs[0].Line != 4 || errs[0].Code != CodeDuplicateListed {
		t.Errorf("repeat on line 4: errors %+v, want one duplicateListed on line 4", errs)
	}
}
