//go:build unix

package pglocal

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// locationFile, in the data dir, records the cluster directory's absolute path.
	locationFile = "cluster-location"
	// initdbMarker, in the cluster directory, records that initdb finished.
	initdbMarker = "initdb.done"
	// socketName is the server's socket file for the default port.
	socketName = ".s.PGSQL.5432"
	// maxSocketPath is the longest socket path used; the kernel's sun_path limit is
	// 107 bytes, some systems have 103.
	maxSocketPath = 100
)

// serverCredential returns who runs initdb and the server: nil (ourselves) unless we
// are root, then the postgres system user with its groups.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pglocal: running as root needs the postgres system user (PostgreSQL refuses to run as root): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pglocal: postgres user ids: %w", err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil && uint32(g) != cred.Gid {
				cred.Groups = append(cred.Groups, uint32(g))
			}
		}
	}
	return cred, nil
}

// clusterLocation returns the cluster directory for dataDir: the one recorded in the
// data dir, else <dataDir>/postgres, or — when the server runs as another user who
// cannot reach dataDir — <fallback>/<first 16 hex of sha256(dataDir)>. A new choice
// is recorded.
func clusterLocation(dataDir, fallback string, runAs *syscall.Credential) (string, error) {
	recordPath := filepath.Join(dataDir, locationFile)
	if b, err := os.ReadFile(recordPath); err == nil {
		loc := strings.TrimSpace(string(b))
		if !filepath.IsAbs(loc) {
			return "", fmt.Errorf("pglocal: %s: not an absolute path: %q", recordPath, loc)
		}
		return loc, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("pglocal: read cluster location: %w", err)
	}
	loc := filepath.Join(dataDir, "postgres")
	if runAs != nil && !reachable(dataDir, runAs) {
		sum := sha256.Sum256([]byte(dataDir))
		if err := os.MkdirAll(fallback, 0o755); err != nil {
			return "", fmt.Errorf("pglocal: create %s: %w", fallback, err)
		}
		if !reachable(fallback, runAs) {
			return "", fmt.Errorf("pglocal: neither %s nor %s can be reached by uid %d", dataDir, fallback, runAs.Uid)
		}
		loc = filepath.Join(fallback, hex.EncodeToString(sum[:])[:16])
	}
	if err := os.WriteFile(recordPath, []byte(loc+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("pglocal: record cluster location: %w", err)
	}
	return loc, nil
}

// reachable reports whether cred may search (traverse) dir and every ancestor, judged
// by mode bits (ACLs are not consulted).
func reachable(dir string, cred *syscall.Credential) bool {
	dir = filepath.Clean(dir)
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || !searchable(fi.Mode().Perm(), st.Uid, st.Gid, cred) {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

func searchable(perm os.FileMode, uid, gid uint32, cred *syscall.Credential) bool {
	if uid == cred.Uid {
		return perm&0o100 != 0
	}
	inGroup := gid == cred.Gid
	for _, g := range cred.Groups {
		inGroup = inGroup || g == gid
	}
	if inGroup {
		return perm&0o010 != 0
	}
	return perm&0o001 != 0
}

// socketDirFor returns where the server's socket goes: the cluster directory, or a
// short private directory under /tmp (derived from the cluster directory, so other
// processes find it) when the socket path would be too long.
func socketDirFor(root string) string {
	if len(root)+1+len(socketName) <= maxSocketPath {
		return root
	}
	sum := sha256.Sum256([]byte(root))
	return filepath.Join("/tmp", "gatehouse-"+hex.EncodeToString(sum[:])[:16])
}
