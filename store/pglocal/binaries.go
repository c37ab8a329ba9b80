//go:build unix

package pglocal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// binaries are the three server programs a cluster needs, all from one directory.
type binaries struct {
	dir     string
	initdb  string
	pgCtl   string
	postgre string
}

// binDirCandidates lists directories that may hold the server programs, best first:
// PATH, then Debian/Ubuntu's /usr/lib/postgresql/<major>/bin (newest first), then
// RHEL's /usr/pgsql-<major>/bin, then Homebrew's prefixes.
func binDirCandidates(path string) []string {
	var dirs []string
	dirs = append(dirs, filepath.SplitList(path)...)
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",
		"/usr/pgsql-*/bin",
		"/opt/homebrew/opt/postgresql*/bin",
		"/usr/local/opt/postgresql*/bin",
	} {
		matches, _ := filepath.Glob(pattern)
		sort.SliceStable(matches, func(i, j int) bool {
			return versionInPath(matches[i]) > versionInPath(matches[j])
		})
		dirs = append(dirs, matches...)
	}
	return dirs
}

var versionDigits = regexp.MustCompile(`(\d+)/bin$`)

// versionInPath extracts the major version from a directory such as
// /usr/lib/postgresql/15/bin or /opt/homebrew/opt/postgresql@16/bin; 0 when absent
// (Homebrew's unversioned "postgresql" sorts last).
func versionInPath(dir string) int {
	m := versionDigits.FindStringSubmatch(dir)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// binariesIn returns the server programs in dir, or false if any is missing.
func binariesIn(dir string) (binaries, bool) {
	if dir == "" {
		return binaries{}, false
	}
	b := binaries{
		dir:     dir,
		initdb:  filepath.Join(dir, "initdb"),
		pgCtl:   filepath.Join(dir, "pg_ctl"),
		postgre: filepath.Join(dir, "postgres"),
	}
	for _, p := range []string{b.initdb, b.pgCtl, b.postgre} {
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return binaries{}, false
		}
	}
	return b, true
}

// findBinaries picks the server programs. With binDir set only that directory counts.
// wantMajor > 0 (an existing cluster's PG_VERSION) prefers a matching installation, so a
// machine with several versions keeps serving a cluster with the version that made it.
func findBinaries(ctx context.Context, binDir string, wantMajor int) (binaries, error) {
	dirs := []string{binDir}
	if binDir == "" {
		dirs = binDirCandidates(os.Getenv("PATH"))
	}
	var found []binaries
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		if b, ok := binariesIn(d); ok {
			found = append(found, b)
		}
	}
	if len(found) == 0 {
		return binaries{}, ErrNoBinaries
	}
	if wantMajor > 0 {
		for _, b := range found {
			if major, err := serverMajor(ctx, b.postgre); err == nil && major == wantMajor {
				return b, nil
			}
		}
	}
	return found[0], nil
}

// serverMajor runs `postgres -V` ("postgres (PostgreSQL) 15.10 (Debian 15.10-1)").
func serverMajor(ctx context.Context, postgres string) (int, error) {
	out, err := exec.CommandContext(ctx, postgres, "-V").Output()
	if err != nil {
		return 0, fmt.Errorf("pglocal: %s -V: %w", postgres, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return 0, fmt.Errorf("pglocal: unexpected version output %q", out)
	}
	majorText, _, _ := strings.Cut(fields[2], ".")
	major, err := strconv.Atoi(majorText)
	if err != nil {
		return 0, fmt.Errorf("pglocal: unexpected version output %q", out)
	}
	return major, nil
}
