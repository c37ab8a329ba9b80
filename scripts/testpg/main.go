// Command testpg runs one throwaway PostgreSQL (store/pglocal) for as long as its
// standard input stays open, and prints a URL for it on standard output: the URL of
// its superuser, which may create databases, as GATEHOUSE_TEST_DATABASE_URL wants.
// Test binaries pointed at it share one server, each test cloning its own database
// from the migrated template (store/storetest), instead of each binary starting a
// cluster of its own. scripts/mutate runs it for store's mutants:
//
//	coproc PG { go run ./scripts/testpg; }
//	read -r url <&"${PG[0]}"   # ... then close PG's input to stop the server
//
// It stops the server and removes its files when its input ends or on SIGINT or
// SIGTERM.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gatehouse-dev/gatehouse/store/pglocal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "testpg: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	start, cancel := context.WithTimeout(ctx, 2*time.Minute)
	c, err := pglocal.Open(start, pglocal.Options{})
	cancel()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, c.URL("postgres")); err != nil {
		return closeCluster(ctx, c, err)
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return closeCluster(ctx, c, nil)
}

// closeCluster stops the server and removes its files, whatever ended the wait.
// ctx may have ended (a signal): the stop gets a minute of its own.
func closeCluster(ctx context.Context, c *pglocal.Cluster, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if cerr := c.Close(ctx); cerr != nil && err == nil {
		err = fmt.Errorf("stop the server: %w", cerr)
	}
	return err
}
