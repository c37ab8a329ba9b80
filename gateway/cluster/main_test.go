package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// shared is the Redis that most tests use, each under its own key prefix.
var shared *redisServer

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ghredis")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared, err = startRedis(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gateway/cluster tests:", err)
		return 1
	}
	code := m.Run()
	if err := shared.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop redis-server:", err)
	}
	if code == 0 {
		// fasthttp (the gateways' upstream client) ends its idle-connection
		// cleaner on its own, up to 30 s after a host's last connection closed.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// redisServer is a throwaway redis-server child process on a unix socket:
// no persistence, no TCP port.
type redisServer struct {
	dir, sock string
	cmd       *exec.Cmd
}

// redisBinary finds redis-server or says how to install it.
func redisBinary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", errors.New("redis-server not found: install it (apt-get install redis-server) " +
		"to run the cluster-mode tests; scripts/test does this when run as root")
}

func startRedis(dir string) (*redisServer, error) {
	s := &redisServer{dir: dir, sock: filepath.Join(dir, "redis.sock")}
	return s, s.start()
}

func (s *redisServer) start() error {
	bin, err := redisBinary()
	if err != nil {
		return err
	}
	s.cmd = exec.Command(bin, "--port", "0", "--unixsocket", s.sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pingSocket(s.sock) == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = s.stop()
			return errors.New("redis-server did not answer PING within 10s")
		}
		time.Sleep(10 * time.Millisecond) // polling a child process's socket, not synchronising goroutines
	}
}

// kill stops the server abruptly, as a crash would.
func (s *redisServer) kill() error {
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	_ = s.cmd.Wait()
	return nil
}

func (s *redisServer) stop() error {
	if err := s.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
		return nil
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
		return errors.New("redis-server ignored SIGINT")
	}
}

func pingSocket(sock string) error {
	conn, err := net.DialTimeout("unix", sock, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// newClient is a go-redis client on sock, closed at the end of the test.
func newClient(t testing.TB, sock string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Network:         "unix",
		Addr:            sock,
		DialTimeout:     200 * time.Millisecond,
		ReadTimeout:     500 * time.Millisecond,
		WriteTimeout:    500 * time.Millisecond,
		MaxRetries:      2,
		MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: 20 * time.Millisecond,
		PoolSize:        64,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

var prefixSeq atomic.Int64

// uniquePrefix keeps the keys of one test apart from the others'.
func uniquePrefix(t testing.TB) string {
	return fmt.Sprintf("t%d-%s", prefixSeq.Add(1), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()))
}

// newController starts a replica, closed at the end of the test.
func newController(t testing.TB, rdb redis.UniversalClient, opts Options) *Controller {
	t.Helper()
	opts.Client = rdb
	if opts.Recheck == 0 {
		opts.Recheck = 200 * time.Millisecond
	}
	if opts.OpTimeout == 0 {
		opts.OpTimeout = 500 * time.Millisecond
	}
	c, err := New(t.Context(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := context.WithoutCancel(t.Context())
	t.Cleanup(func() {
		if err := c.Close(ctx); err != nil {
			t.Logf("Close: %v", err)
		}
	})
	return c
}

// replicas starts n replicas on the shared Redis, each with its own client,
// all with the same prefix and caps.
func replicas(t *testing.T, n int, caps map[string]int, opts Options) []*Controller {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = uniquePrefix(t)
	}
	out := make([]*Controller, n)
	for i := range out {
		o := opts
		o.ReplicaID = fmt.Sprintf("r%d", i)
		out[i] = newController(t, newClient(t, shared.sock), o)
		out[i].SetCaps(caps)
	}
	return out
}

// path builds a request path from gate keys.
func path(keys ...string) []admission.GateRef {
	out := make([]admission.GateRef, len(keys))
	for i, k := range keys {
		out[i] = admission.GateRef{Level: admission.LevelOf(k), Key: k}
	}
	return out
}

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		<-tick.C
	}
}

// zcard reads a sorted set's size straight from Redis.
func zcard(t testing.TB, rdb redis.UniversalClient, key string) int {
	t.Helper()
	n, err := rdb.ZCard(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("ZCARD %s: %v", key, err)
	}
	return int(n)
}

// result is what an asynchronous Acquire returned.
type result struct {
	p   admission.Grant
	err error
}

func acquireAsync(ctx context.Context, c *Controller, req admission.Request) <-chan result {
	ch := make(chan result, 1)
	go func() {
		p, err := c.Acquire(ctx, req)
		ch <- result{p, err}
	}()
	return ch
}

func recv(t testing.TB, ch <-chan result, limit time.Duration) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(limit):
		t.Fatalf("no result within %s", limit)
		return result{}
	}
}
