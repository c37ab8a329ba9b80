package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a process the harness started and must stop.
type child struct {
	name string
	cmd  *exec.Cmd
	stop syscall.Signal // the graceful stop signal
	done chan struct{}  // closed when the process has been reaped
	err  error          // Wait's result, valid after done
}

// startChild starts bin with args and env (added to the harness's own), its
// stderr (and stdout beyond the first matching line) appended to logPath. It
// waits, at most until ctx ends, for a stdout line that starts with prefix
// and returns the rest of that line.
//
// The child gets its own process group, so a terminal's Ctrl-C reaches only
// the harness, which then stops the children in order; a parent-death signal
// stops it should the harness be killed outright.
func startChild(ctx context.Context, name, bin string, args, env []string, stop syscall.Signal, logPath, prefix string) (*child, string, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("bench: %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: stop}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, "", fmt.Errorf("bench: %s stdout: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, "", fmt.Errorf("bench: start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, stop: stop, done: make(chan struct{})}

	found := make(chan string, 1)
	var copied sync.WaitGroup
	copied.Go(func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				select {
				case found <- rest:
				default:
				}
			}
		}
		// Drain anything past a very long line so the child never blocks on a full pipe.
		_, _ = io.Copy(logf, stdout)
	})
	go func() {
		copied.Wait() // Wait must not close the pipe while it is being read
		c.err = cmd.Wait()
		logf.Close()
		close(c.done)
	}()

	select {
	case rest := <-found:
		return c, rest, nil
	case <-c.done:
		return nil, "", fmt.Errorf("bench: %s exited before it was ready (%v); see %s", name, c.err, logPath)
	case <-ctx.Done():
		c.shutdown(5 * time.Second)
		return nil, "", fmt.Errorf("bench: waiting for %s: %w", name, ctx.Err())
	}
}

// pid returns the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// shutdown sends the graceful stop signal, waits up to grace, then kills the
// process. It reports how the process ended. Safe to call more than once.
func (c *child) shutdown(grace time.Duration) error {
	select {
	case <-c.done:
		return c.exitErr()
	default:
	}
	_ = c.cmd.Process.Signal(c.stop)
	select {
	case <-c.done:
		return c.exitErr()
	case <-time.After(grace):
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	return fmt.Errorf("bench: %s did not stop within %s and was killed", c.name, grace)
}

// exitErr is nil for a clean exit or one caused by the stop signal.
func (c *child) exitErr() error {
	var ee *exec.ExitError
	if c.err == nil {
		return nil
	}
	if errors.As(c.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == c.stop {
			return nil
		}
	}
	return fmt.Errorf("bench: %s: %w", c.name, c.err)
}

// buildBinaries compiles Gatehouse and the fake upstream into dir, once.
func buildBinaries(ctx context.Context, moduleRoot, dir string, stderr io.Writer) (gatehouse, upstream string, err error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/gatehouse", "./cmd/mockupstream")
	cmd.Dir = moduleRoot
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("bench: go build: %w", err)
	}
	return filepath.Join(dir, "gatehouse"), filepath.Join(dir, "mockupstream"), nil
}

// moduleRoot returns the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("bench: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("bench: run from inside the gatehouse module")
	}
	return filepath.Dir(gomod), nil
}

// raiseFileLimit raises RLIMIT_NOFILE to at least want (children inherit it):
// the hard limit too when the process may (root), else the soft limit up to
// the hard one. It returns the soft limit in force afterwards.
func raiseFileLimit(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("bench: getrlimit: %w", err)
	}
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	if lim.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			return want, nil
		}
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("bench: setrlimit: %w", err)
	}
	return lim.Cur, nil
}
