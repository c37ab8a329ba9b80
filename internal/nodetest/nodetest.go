// Package nodetest installs pinned npm packages for the tests that run Node
// programs (the official SDKs against Gatehouse), once per machine.
package nodetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Package returns the directory holding npm package pkg at version,
// installing it with npm into the user's cache the first time (as
// scripts/lint-openapi does with Redocly), under short-version, and node's
// path. Without node and npm the test is skipped, and says so.
func Package(t testing.TB, pkg, short, version string) (dir, node string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node and npm are not installed: the " + pkg + " SDK test needs them")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("cache dir: %v", err)
	}
	dir = filepath.Join(cache, "gatehouse", short+"-"+version)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err == nil {
		return dir, node
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--silent", pkg+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install %s@%s: %v\n%s", pkg, version, err, out)
	}
	return dir, node
}
