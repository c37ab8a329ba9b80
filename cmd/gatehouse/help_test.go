package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpSucceeds checks that asking a subcommand for its flags is not an error and
// that the flags shown name their environment variables.
func TestHelpSucceeds(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "serve", args: []string{"serve", "--help"}, want: "GATEHOUSE_ADDR"},
		{name: "serve short", args: []string{"serve", "-h"}, want: "GATEHOUSE_DATA_DIR"},
		{name: "top level", args: []string{"--help"}, want: "usage: gatehouse"},
		{name: "user group", args: []string{"user", "--help"}, want: "gatehouse user add"},
		{name: "user group bare help", args: []string{"user", "help"}, want: "gatehouse user list"},
		{name: "token group", args: []string{"token", "-h"}, want: "gatehouse token create"},
		{name: "key group", args: []string{"key", "--help"}, want: "gatehouse key create"},
		{name: "user add", args: []string{"user", "add", "--help"}, want: "-email"},
		{name: "token create", args: []string{"token", "create", "-h"}, want: "GATEHOUSE_DATABASE_URL"},
		{name: "demo-traffic", args: []string{"demo-traffic", "--help"}, want: "GATEHOUSE_DATA_DIR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			getenv := func(string) string { return "" }
			if err := run(t.Context(), tt.args, getenv, strings.NewReader(""), &stdout, &stderr); err != nil {
				t.Fatalf("run(%q) = %v, want nil", tt.args, err)
			}
			if out := stdout.String() + stderr.String(); !strings.Contains(out, tt.want) {
				t.Errorf("run(%q) printed %q, want it to mention %s", tt.args, out, tt.want)
			}
		})
	}
}
