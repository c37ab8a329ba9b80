//go:build unix

// Package pglocal runs a private PostgreSQL server from the binaries installed on the
// machine, for Gatehouse's managed mode and for tests.
//
// A cluster lives in a cluster directory holding data/ (PGDATA), postgres.log and, when
// its path is short enough, the server's unix socket. The server listens on that socket
// only (no TCP port) and uses trust authentication: the socket directory is mode 0700
// and owned by the server's user, so only that user (and root) can connect at all.
// The superuser role is always "postgres".
//
// Postgres refuses to run as root. When the calling process is root, initdb and the
// server run as the "postgres" system user; the cluster directory is chowned to it and,
// if that user cannot reach the data directory (a checkout under /root is mode 0700),
// the cluster lives under FallbackDir (/var/lib/gatehouse/<hash>) instead. The chosen
// place is recorded in <data dir>/cluster-location.
//
// A persistent cluster is owned by whoever holds the flock on <data dir>/gatehouse.lock.
// The owner starts the server (stopping a server left behind by a killed previous owner
// first) and stops it on Close. With Options.Attach, a process that finds the lock held
// uses the owner's running server instead of starting its own.
//
// # Decisions
//
//   - postgres runs as a direct child (not through pg_ctl start) in its own process
//     group, with a parent-death signal on Linux: Ctrl-C reaches Gatehouse, which stops
//     Postgres last, and the server never outlives a killed owner for long.
//   - A held lock is retried for 500 ms first: a lock this process just released can
//     still be held by a child forked meanwhile by another goroutine, until its exec
//     closes the descriptor. A real owner holds it for as long as it runs.
//   - A stale postmaster.pid (dead, zombie or reused PID, checked through the process's
//     working directory) is removed after the dead server's children exit, and stale
//     socket lock files too: where PID 1 does not reap orphans a killed postmaster stays
//     a zombie, which Postgres would take as live.
//   - Supervise restarts a server that exits while it is meant to run (seen through
//     cmd.Wait, no polling), on the same socket, so the pgx pool and the config listener
//     reconnect by themselves. Backoff: 0.5 s, doubling to 10 s, carried over to the next
//     exit unless the server was up for 30 s, so a server that crashes at every start is
//     retried every 10 s, not in a tight loop. Stop and Close clear "meant to run" before
//     they signal, so a shutdown is never restarted.
package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoBinaries is returned by Open when initdb, pg_ctl and postgres cannot be found
// together in any searched directory.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found (initdb, pg_ctl, postgres): install PostgreSQL (e.g. apt-get install postgresql) or set GATEHOUSE_DATABASE_URL")

// ErrLocked is returned by Open (without Options.Attach) when another process holds the
// data directory's lock.
var ErrLocked = errors.New("pglocal: data dir is in use by another process")

// DefaultFallbackDir is where clusters live when root's server user cannot reach the
// data directory.
const DefaultFallbackDir = "/var/lib/gatehouse"

// Superuser is the role initdb creates and URL connects as.
const Superuser = "postgres"

// startTimeout bounds how long a server may take to accept connections (crash
// recovery after a kill can take a while on a large cluster).
const startTimeout = 2 * time.Minute

// Options configure Open.
type Options struct {
	// DataDir is Gatehouse's data directory. Empty means a throwaway cluster in a new
	// temporary directory, tuned for speed (fsync off) and removed by Close.
	DataDir string
	// BinDir, when set, is the only directory searched for initdb, pg_ctl and postgres.
	// Otherwise PATH, /usr/lib/postgresql/*/bin (newest first), /usr/pgsql-*/bin and
	// Homebrew's prefixes are searched.
	BinDir string
	// Attach makes Open use the running server of the process that holds the data
	// directory's lock instead of failing with ErrLocked. Ignored for throwaway clusters.
	Attach bool
	// FallbackDir replaces DefaultFallbackDir (tests).
	FallbackDir string
	// Logger receives lifecycle events; nil discards them.
	Logger *slog.Logger
}

// Cluster is a managed PostgreSQL cluster. Its methods are safe for concurrent use.
type Cluster struct {
	logger    *slog.Logger
	bins      binaries
	root      string // cluster directory
	pgdata    string
	socketDir string
	ownSocket bool                // socketDir is a fallback temp dir we created
	throwaway bool                // root is removed by Close
	owned     bool                // we hold the lock and run the server
	runAs     *syscall.Credential // nil: run as ourselves
	lock      *os.File            // nil for throwaway and attached clusters

	clock clock // the supervisor's time; tests replace it

	mu          sync.Mutex
	proc        *process
	wantRunning bool          // Start was called and no Stop since: an exit is unexpected
	startedAt   time.Time     // when proc became ready (clock.now)
	changed     chan struct{} // closed and replaced when proc or wantRunning change (see notifyLocked)
	closed      bool
	quit        chan struct{} // closed by Close: a supervisor returns
	quitOnce    sync.Once
}

// Open finds the server binaries and returns a started cluster: a throwaway one when
// opts.DataDir is empty, else the data directory's persistent cluster (created by
// initdb on first use). It returns ErrNoBinaries when no installation is found,
// ErrLocked when another process owns the data directory and opts.Attach is false.
func Open(ctx context.Context, opts Options) (*Cluster, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	runAs, err := serverCredential()
	if err != nil {
		return nil, err
	}
	if opts.DataDir == "" {
		return openThrowaway(ctx, opts, logger, runAs)
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pglocal: data dir: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("pglocal: create data dir: %w", err)
	}
	lock, err := tryLockSettled(dataDir)
	if errors.Is(err, errLockHeld) {
		if !opts.Attach {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dataDir)
		}
		return attach(ctx, dataDir, logger)
	}
	if err != nil {
		return nil, err
	}
	c, err := openOwned(ctx, opts, logger, runAs, dataDir)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	c.lock = lock
	return c, nil
}

func openThrowaway(ctx context.Context, opts Options, logger *slog.Logger, runAs *syscall.Credential) (*Cluster, error) {
	bins, err := findBinaries(ctx, opts.BinDir, 0)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "gatehouse-pg-")
	if err != nil {
		return nil, fmt.Errorf("pglocal: create temp dir: %w", err)
	}
	c := &Cluster{logger: logger, bins: bins, root: root, throwaway: true, owned: true, runAs: runAs, quit: make(chan struct{})}
	if err := c.prepare(ctx); err != nil {
		c.cleanupFiles()
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		c.cleanupFiles()
		return nil, err
	}
	return c, nil
}

func openOwned(ctx context.Context, opts Options, logger *slog.Logger, runAs *syscall.Credential, dataDir string) (*Cluster, error) {
	fallback := opts.FallbackDir
	if fallback == "" {
		fallback = DefaultFallbackDir
	}
	root, err := clusterLocation(dataDir, fallback, runAs)
	if err != nil {
		return nil, err
	}
	bins, err := findBinaries(ctx, opts.BinDir, clusterMajor(filepath.Join(root, "data")))
	if err != nil {
		return nil, err
	}
	c := &Cluster{logger: logger, bins: bins, root: root, owned: true, runAs: runAs, quit: make(chan struct{})}
	if err := c.prepare(ctx); err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// attach returns a Cluster for the server run by the lock's holder, once it is ready.
func attach(ctx context.Context, dataDir string, logger *slog.Logger) (*Cluster, error) {
	loc, err := os.ReadFile(filepath.Join(dataDir, locationFile))
	if err != nil {
		return nil, fmt.Errorf("pglocal: attach to running server: %w", err)
	}
	root := strings.TrimSpace(string(loc))
	c := &Cluster{logger: logger, root: root, pgdata: filepath.Join(root, "data"), socketDir: socketDirFor(root), quit: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := waitReady(ctx, c.pgdata, 0, nil); err != nil {
		return nil, fmt.Errorf("pglocal: attach to running server in %s: %w", root, err)
	}
	logger.Info("using the PostgreSQL server of the process holding the data dir lock", slog.String("socket_dir", c.socketDir))
	return c, nil
}

// prepare creates the cluster directory and socket directory and runs initdb once.
func (c *Cluster) prepare(ctx context.Context) error {
	c.pgdata = filepath.Join(c.root, "data")
	if err := c.makePrivateDir(c.root); err != nil {
		return err
	}
	c.socketDir = socketDirFor(c.root)
	c.ownSocket = c.socketDir != c.root
	if err := c.ensureSocketDir(); err != nil {
		return err
	}
	marker := filepath.Join(c.root, initdbMarker)
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	// No marker: initdb never finished (or never ran). Start from scratch.
	if err := os.RemoveAll(c.pgdata); err != nil {
		return fmt.Errorf("pglocal: remove unfinished cluster: %w", err)
	}
	args := []string{"-D", c.pgdata, "-U", Superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-instructions"}
	if c.throwaway {
		args = append(args, "--no-sync")
	}
	c.logger.Info("creating PostgreSQL cluster", slog.String("dir", c.pgdata))
	if out, err := c.run(ctx, c.bins.initdb, args...); err != nil {
		return fmt.Errorf("pglocal: initdb: %w: %s", err, bytes.TrimSpace(out))
	}
	if err := os.WriteFile(marker, []byte("ok\n"), 0o600); err != nil {
		return fmt.Errorf("pglocal: record initdb: %w", err)
	}
	return nil
}

// ensureSocketDir creates the short fallback socket directory when one is used.
func (c *Cluster) ensureSocketDir() error {
	if !c.ownSocket {
		return nil
	}
	return c.makePrivateDir(c.socketDir)
}

// makePrivateDir creates dir (mode 0700) owned by the server user, refusing an existing
// path that is a symlink or owned by someone else.
func (c *Cluster) makePrivateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pglocal: create %s: %w", dir, err)
	}
	if c.runAs != nil {
		if err := os.Chown(dir, int(c.runAs.Uid), int(c.runAs.Gid)); err != nil {
			return fmt.Errorf("pglocal: chown %s: %w", dir, err)
		}
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != c.serverUID() {
		return fmt.Errorf("pglocal: %s is not a directory owned by uid %d", dir, c.serverUID())
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("pglocal: chmod %s: %w", dir, err)
	}
	return nil
}

func (c *Cluster) serverUID() int {
	if c.runAs != nil {
		return int(c.runAs.Uid)
	}
	return os.Getuid()
}

// run runs a server program as the server user and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.root
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.runAs}
	return cmd.CombinedOutput()
}

// serverEnv is the environment for server programs: ours without libpq variables that
// could redirect them, with a C locale for predictable messages.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// URL returns a pgx-compatible URL for database dbname on the cluster's socket.
func (c *Cluster) URL(dbname string) string {
	q := url.Values{}
	q.Set("host", c.socketDir)
	q.Set("sslmode", "disable")
	u := url.URL{Scheme: "postgres", User: url.User(Superuser), Path: "/" + dbname, RawQuery: q.Encode()}
	return u.String()
}

// SocketDir returns the directory holding the server's unix socket.
func (c *Cluster) SocketDir() string { return c.socketDir }

// Dir returns the cluster directory (PGDATA is its data subdirectory).
func (c *Cluster) Dir() string { return c.root }

// Owned reports whether this Cluster runs the server (false when Open attached to the
// server of another process; Start, Stop and Close then leave the server alone).
func (c *Cluster) Owned() bool { return c.owned }

// Close stops the server, releases the data directory's lock and, for a throwaway
// cluster, removes its files. The Cluster cannot be used afterwards.
func (c *Cluster) Close(ctx context.Context) error {
	// First, without the lock: a supervisor in the middle of a restart holds it, and
	// its start gives up when quit closes.
	c.quitOnce.Do(func() { close(c.quit) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	err := c.stopLocked(ctx)
	c.notifyLocked()
	if c.lock != nil {
		_ = c.lock.Close() // closing the descriptor releases the flock
	}
	if c.owned {
		c.cleanupFiles()
	}
	return err
}

// cleanupFiles removes a throwaway cluster and an (empty) fallback socket directory.
func (c *Cluster) cleanupFiles() {
	if c.ownSocket {
		_ = os.Remove(c.socketDir)
	}
	if c.throwaway {
		if err := os.RemoveAll(c.root); err != nil {
			c.logger.Warn("removing throwaway cluster", slog.String("dir", c.root), slog.Any("error", err))
		}
	}
}

// clusterMajor reads PGDATA/PG_VERSION; 0 when there is no cluster yet.
func clusterMajor(pgdata string) int {
	b, err := os.ReadFile(filepath.Join(pgdata, "PG_VERSION"))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}
