package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigEnvRules (issue 24, finding 10): an apiKey's ${NAME} reads only variables
// named GATEHOUSE_SECRET_* (never GATEHOUSE_SECRET_KEY, the installation secret) or
// listed in --env-allow; any other, set or not, is an error naming the rule.
func TestConfigEnvRules(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"GATEHOUSE_SECRET_ZAI":     "sk-zai-from-env",
		"GATEHOUSE_SECRET_KEY":     "the-installation-secret",
		"GATEHOUSE_ADMIN_PASSWORD": "the-admin-password",
		"ZAI_KEY":                  "sk-zai-allowed",
	}
	getenv := func(k string) string { return env[k] }
	for _, tt := range []struct {
		ref   string
		allow []string
		want  string // the resolved key, or "error: <part of the message>"
	}{
		{ref: "GATEHOUSE_SECRET_ZAI", want: "sk-zai-from-env"},
		{ref: "ZAI_KEY", allow: []string{"ZAI_KEY"}, want: "sk-zai-allowed"},
		{ref: "GATEHOUSE_ADMIN_PASSWORD", want: "error: ${GATEHOUSE_ADMIN_PASSWORD} may not be read: an apiKey reads only variables named GATEHOUSE_SECRET_*"},
		{ref: "GATEHOUSE_SECRET_KEY", want: "error: (never GATEHOUSE_SECRET_KEY) or listed in --env-allow"},
		{ref: "ZAI_KEY", allow: []string{"OTHER"}, want: "error: may not be read"},
		{ref: "GATEHOUSE_SECRET_UNSET", want: "error: environment variable GATEHOUSE_SECRET_UNSET is not set"},
	} {
		members := map[string]json.RawMessage{"apiKey": json.RawMessage(`"${` + tt.ref + `}"`)}
		fe, err := resolveAPIKey(members, getenv, tt.allow)
		if err != nil {
			t.Fatal(err)
		}
		if want, isErr := strings.CutPrefix(tt.want, "error: "); isErr {
			if len(fe) != 1 || fe[0].Field != "apiKey" || !strings.Contains(fe[0].Message, want) {
				t.Errorf("${%s} allow %v: %v, want an apiKey error saying %q", tt.ref, tt.allow, fe, want)
			}
			continue
		}
		var got string
		if len(fe) > 0 || json.Unmarshal(members["apiKey"], &got) != nil || got != tt.want {
			t.Errorf("${%s} allow %v: key %s, errors %v; want %q", tt.ref, tt.allow, members["apiKey"], fe, tt.want)
		}
	}
}
