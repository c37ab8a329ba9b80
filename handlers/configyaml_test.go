package handlers

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/handlers/api"
)

// TestConfigYAML: YAML reads with the JSON rules (1e3 whole, 1.5 not, a quoted number
// is a string), and a document that does not parse names its line.
func TestConfigYAML(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	bad := "settings:\n  maxAttempts: 2\nconnections:\n\t- name: x\n"
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: bad,
		contentType: api.YAMLContentType, invalidRequest: true}), http.StatusBadRequest)
	if !strings.Contains(p.Detail, "line 4") {
		t.Errorf("YAML error detail %q, want it to name line 4", p.Detail)
	}
	p = problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"),
		body: "settings:\n  maxAttempts: 2\n  maxAttempts: 3\n", contentType: api.YAMLContentType, invalidRequest: true}), http.StatusBadRequest)
	if !strings.Contains(p.Detail, "line 3") || !strings.Contains(p.Detail, "twice") {
		t.Errorf("duplicate key detail %q, want line 3 and twice", p.Detail)
	}
	a.do(t, call{method: http.MethodPost, path: path("config", "apply"), body: "x", contentType: "text/plain",
		invalidRequest: true}).want(t, http.StatusUnsupportedMediaType)

	for _, tt := range []struct {
		in   string
		want string // JSON, or "error: <part of the message>"
	}{
		{"a: 1e3\n", `{"a":1e3}`},
		{"a: 1.5\n", `{"a":1.5}`},
		{"a: +12\n", `{"a":12}`},
		{"a: 0x10\n", `{"a":16}`},
		{"a: '3'\n", `{"a":"3"}`},
		{"a: [x, {b: null}]\nc: true\n", `{"a":["x",{"b":null}],"c":true}`},
		{"base: &b {x: 1}\nc: *b\n", `{"base":{"x":1},"c":{"x":1}}`},
		{`{"a": 1, "b": [2]}`, `{"a": 1, "b": [2]}`},
		{"a: .inf\n", "error: line 1: not a finite number"},
		{"a: 1\n---\nb: 2\n", "error: line 2: a second YAML document"},
		{"", "error: the document is empty"},
		{"? [a]\n: 1\n", "error: line 1: a key must be a string"},
	} {
		got, err := api.ConfigJSON([]byte(tt.in))
		if want, isErr := strings.CutPrefix(tt.want, "error: "); isErr {
			var se *api.SyntaxError
			if !errors.As(err, &se) || !strings.Contains(se.Error(), want) {
				t.Errorf("ConfigJSON(%q) = %s, %v; want a syntax error saying %q", tt.in, got, err, want)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("ConfigJSON(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	// JSON with a key given twice is a field error, as for every API body.
	_, err := api.ConfigJSON([]byte(`{"settings":{"maxAttempts":1,"maxAttempts":2}}`))
	var fe limits.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "settings.maxAttempts" {
		t.Errorf("duplicate JSON key: %v, want a field error at settings.maxAttempts", err)
	}
}

// TestConfigYAMLTags (issue 24, finding 10): a YAML tag other than the core schema's —
// on a mapping, a sequence, a scalar or a key — is refused with its path, 422 over the
// API, and nothing is written.
func TestConfigYAMLTags(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, path string }{
		{"settings: !!python/object:os.system {maxAttempts: 1}\n", "settings"},
		{"connections:\n  - !!python/object/apply:os.system [ls]\n", "connections[0]"},
		{"settings:\n  maxAttempts: !custom 1\n", "settings.maxAttempts"},
		{"settings:\n  !!python/name:os.system maxAttempts: 1\n", "settings.maxAttempts"},
		{"connections: !!set {a: null}\n", "connections"},
	} {
		_, err := api.ConfigJSON([]byte(tt.in))
		var fe limits.FieldErrors
		if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != tt.path || !strings.Contains(fe[0].Message, "YAML tag") {
			t.Errorf("ConfigJSON(%q) = %v; want one field error at %q naming the tag", tt.in, err, tt.path)
		}
	}
	a := newTestAPI(t, apiOptions{})
	before := auditCount(t, a)
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("config", "apply"), contentType: api.YAMLContentType,
		body: "settings:\n  maxAttempts: 2\nconnections:\n  - !!python/object:builtins.dict {name: x}\n"}), http.StatusUnprocessableEntity)
	if len(p.Errors) != 1 || p.Errors[0].Field != "connections[0]" {
		t.Errorf("errors %+v, want one at connections[0]", p.Errors)
	}
	if n := auditCount(t, a); n != before {
		t.Errorf("audit rows %d → %d: a refused document wrote something", before, n)
	}
}
