package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIUsageErrorsStartNoDatabase: a command line that cannot succeed fails with a
// message that says why, before any managed Postgres is started (the data dir is
// never created).
func TestCLIUsageErrorsStartNoDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{name: "key create without name", args: []string{"key", "create"}, want: "--name is required"},
		{name: "token create without name", args: []string{"token", "create"}, want: "--name is required"},
		{name: "token create bad role", args: []string{"token", "create", "--name", "ops", "--role", "root"}, want: `--role must be "admin" or "viewer"`},
		{name: "user add without email", args: []string{"user", "add", "--role", "viewer"}, stdin: "a-long-password\n", want: "--email is required"},
		{name: "user add bad email", args: []string{"user", "add", "--email", "not-an-email", "--role", "viewer"}, stdin: "a-long-password\n", want: "not an email address"},
		{name: "user add bad role", args: []string{"user", "add", "--email", "v@example.com", "--role", "boss"}, stdin: "a-long-password\n", want: `--role must be "admin" or "viewer"`},
		{name: "user add no password", args: []string{"user", "add", "--email", "v@example.com", "--role", "viewer"}, want: "no password"},
		{name: "stray argument", args: []string{"migrate", "now"}, want: `unexpected argument "now"`},
		{name: "name given without flag", args: []string{"key", "create", "agents"}, want: `unexpected argument "agents"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dataDir := filepath.Join(t.TempDir(), "data")
			getenv := func(k string) string {
				if k == "GATEHOUSE_DATA_DIR" {
					return dataDir
				}
				return ""
			}
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, getenv, strings.NewReader(tt.stdin), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%q) = %v, want an error saying %q", tt.args, err, tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("run(%q) printed %q on stdout, want nothing", tt.args, stdout.String())
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("run(%q) created the data dir (stat: %v): it started the database for a usage error", tt.args, err)
			}
		})
	}
}
