package httpkit

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/web"
)

// TestEveryAPICodeIsWorded fails when the handlers can report a problem that the API
// cannot word in English or the dashboard's catalogs cannot word at all.
func TestEveryAPICodeIsWorded(t *testing.T) {
	t.Parallel()
	for _, code := range apiCodes() {
		if msg := apiMessage(code); msg == apiMessage("no-such-code") {
			t.Errorf("code %q has no English wording of its own in apiMessage", code)
		}
		if !web.HasValidationMessage(code) {
			t.Errorf("code %q has no catalog entry validation.%s", code, code)
		}
	}
}

// TestConnectionErrorsHaveCodes decodes bad connection documents and checks that every
// problem carries a listed code, so none can reach the dashboard only in English.
func TestConnectionErrorsHaveCodes(t *testing.T) {
	t.Parallel()
	s := &Core{validate: NewValidator()}
	known := append(limits.Codes(), apiCodes()...)
	tests := []struct {
		name string
		doc  string
	}{
		{name: "not an object", doc: `[1]`},
		{name: "wrong types", doc: `{"name":null,"provider":1,"apiStyle":"x","baseUrl":"ftp://h?q","apiKey":3,"models":"m",` +
			`"priority":1.5,"enabled":"yes","color":"red"}`},
		{name: "rules", doc: `{"name":"a b","provider":"Z","apiStyle":"grpc","baseUrl":"http://h","apiKey":" ","models":["a","a","b c",7],` +
			`"priority":5000,"rateLimitOverrides":{"maxConcurrent":-1,"modelConcurrency":{"glm-5":0},"tmp":1}}`},
		{name: "missing", doc: `{"models":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := s.DecodeConnection([]byte(tt.doc), true)
			var fe limits.FieldErrors
			if !errors.As(err, &fe) || len(fe) == 0 {
				t.Fatalf("decodeConnection(%s) = %v, want field errors", tt.doc, err)
			}
			for _, e := range fe {
				if !slices.Contains(known, e.Code) {
					t.Errorf("%s: %q has code %q, which no code list holds", e.Field, e.Message, e.Code)
				}
			}
		})
	}
}

func TestFieldErrorKeepsAPIWording(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  limits.FieldError
		want limits.FieldError
	}{
		{
			name: "own rule",
			got:  FieldError("name", codeConnName),
			want: limits.FieldError{Field: "name", Code: codeConnName, Message: "must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"},
		},
		{
			name: "shared code with arguments",
			got:  FieldError("limit", limits.CodeWholeNumberRange, 1, 500),
			want: limits.FieldError{Field: "limit", Code: limits.CodeWholeNumberRange, Args: []any{1, 500}, Message: "must be a whole number from 1 to 500"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("fieldError mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
