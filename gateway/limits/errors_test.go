package limits

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type apiConnection struct {
	Name     string            `json:"name" validate:"required,between=1:64"`
	Provider string            `json:"provider" validate:"providerkey"`
	BaseURL  string            `json:"baseUrl" validate:"required,http_url"`
	Models   []string          `json:"models" validate:"min=1,max=500,dive,between=1:128"`
	Priority int               `json:"priority" validate:"between=-1000:1000"`
	Style    string            `form:"apiStyle" validate:"oneof=openai anthropic"`
	Tags     map[string]string `json:"tags" validate:"dive,keys,between=1:3,endkeys,required"`
}

func TestTranslateValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   apiConnection
		want FieldErrors
	}{
		{
			name: "valid",
			in:   apiConnection{Name: "zai-main", Provider: "zai", BaseURL: "https://api.z.ai/v4", Models: []string{"glm-5"}, Style: "openai"},
		},
		{
			name: "every rule",
			in: apiConnection{Provider: "Z AI", BaseURL: "ftp:/x", Models: []string{"ok", ""}, Priority: 1001, Style: "grpc",
				Tags: map[string]string{"long": "x", "k": ""}},
			want: FieldErrors{
				{Field: "connection.apiStyle", Message: "must be one of: openai, anthropic"},
				{Field: "connection.baseUrl", Message: "must be an absolute http(s) URL"},
				{Field: "connection.models.1", Message: "must be 1 to 128 characters long"},
				{Field: "connection.name", Message: "is required"},
				{Field: "connection.priority", Message: "must be a whole number from -1000 to 1000"},
				{Field: "connection.provider", Message: "provider name must be 1 to 32 characters of a-z, 0-9 and '-'"},
				{Field: "connection.tags.k", Message: "is required"},
				{Field: "connection.tags.long", Message: "must be 1 to 3 characters long"},
			},
		},
		{
			name: "too few models",
			in:   apiConnection{Name: "n", Provider: "p", BaseURL: "http://h", Style: "openai"},
			want: FieldErrors{{Field: "connection.models", Message: "must have at least 1 item"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := TranslateValidation(Validator().Struct(tt.in), "connection")
			if diff := cmp.Diff(tt.want, got, ignoreCodes); diff != "" {
				t.Errorf("TranslateValidation mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTranslateValidationOtherErrors(t *testing.T) {
	t.Parallel()
	if got := TranslateValidation(nil, "x"); got != nil {
		t.Errorf("TranslateValidation(nil) = %v, want nil", got)
	}
	want := FieldErrors{{Field: "x", Message: "is not valid"}}
	if diff := cmp.Diff(want, TranslateValidation(errors.New("boom"), "x"), ignoreCodes); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestFieldErrorsError(t *testing.T) {
	t.Parallel()
	fe := FieldErrors{{Field: "a.b", Message: "unknown field"}, {Field: "", Message: "must be a JSON object"}}
	if got, want := fe.Error(), "a.b: unknown field; must be a JSON object"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var err error = fe
	var target FieldErrors
	if !errors.As(err, &target) || len(target) != 2 {
		t.Errorf("errors.As did not recover FieldErrors from %v", err)
	}
}

func TestNamespacePath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"Overrides.maxWaitMs", []string{"maxWaitMs"}},
		{"Overrides.modelConcurrency[glm-4.7]", []string{"modelConcurrency", "glm-4.7"}},
		{"Settings.providers[zai].maxWaitMs", []string{"providers", "zai", "maxWaitMs"}},
		{"[3]", []string{"3"}},
		{"Root", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, namespacePath(tt.in)); diff != "" {
				t.Errorf("namespacePath(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}
