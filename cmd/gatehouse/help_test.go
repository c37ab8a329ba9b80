package main

import (
	"bytes"
	"os"
	"path/filepath"
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

// TestHelpMatchesReadme: the README's Commands block and "gatehouse --help" list the
// same commands with the same options and exit statuses, line for line.
func TestHelpMatchesReadme(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Commands\n\n```sh\n")
	if !ok {
		t.Fatal("README has no Commands block")
	}
	block, _, _ := strings.Cut(rest, "```")
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	var stdout bytes.Buffer
	if err := run(t.Context(), []string{"--help"}, func(string) string { return "" }, strings.NewReader(""), &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	helpLines := map[string]bool{}
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(l, "gatehouse ") {
			helpLines[norm(l)] = true
		}
	}
	readmeLines := map[string]bool{}
	for _, l := range strings.Split(block, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		readmeLines[norm(l)] = true
		if !helpLines[norm(l)] {
			t.Errorf("README command line not in --help: %q", l)
		}
	}
	for l := range helpLines {
		if !readmeLines[l] {
			t.Errorf("--help command line not in the README: %q", l)
		}
	}
	help := norm(stdout.String())
	for _, want := range []string{"Exit status 1", "2: config diff found changes", "answers --help (exit status 0)"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not say %q", want)
		}
	}
}
