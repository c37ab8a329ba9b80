package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// binPath is the gatehouse binary built once for the process tests.
var binPath string

// TestMain builds the binary, runs the tests with storetest's shared Postgres and
// goroutine-leak check, and removes the binary.
func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gatehouse-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Readable by an unprivileged user too (TestServeUnprivileged runs it as nobody).
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binPath = filepath.Join(dir, "gatehouse")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gatehouse:", err)
		return 1
	}
	return storetest.Run(m)
}
