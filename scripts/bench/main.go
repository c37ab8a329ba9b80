// Command bench is Gatehouse's reproducible end-to-end benchmark. It builds
// Gatehouse and the fake upstream once, starts both on loopback (Gatehouse
// with a managed Postgres in a temporary data dir), creates the connections it
// needs through the REST API and drives closed-loop load with vegeta,
// interleaving direct-to-upstream and through-Gatehouse runs. It prints a
// Markdown table and writes it, with the raw numbers as JSON, to the output
// directory.
//
// Usage (from the module root; `make bench` runs it with the defaults):
//
//	go run ./scripts/bench [-duration 10s] [-reps 3] [-out bench-results]
//	                       [-queue 10000] [-queue-heap] [-profile] [-gogc 400] [-gomemlimit 512MiB]
//	                       [-cluster=true]
//
// With -cluster (the default) the scenarios with cluster targets also run
// through the same build in cluster mode, on a redis-server the harness
// starts (unix socket, no persistence), with Redis's cost per request from
// INFO commandstats.
//
// A smoke run: go run ./scripts/bench -duration 2s -reps 1. docs/BENCHMARKS.md
// describes the method and the targets.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
