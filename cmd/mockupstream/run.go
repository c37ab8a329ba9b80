package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// shutdownGrace bounds how long in-flight requests and streams may take to
// finish after a stop signal.
const shutdownGrace = 10 * time.Second

// run parses flags, serves the fake provider until ctx ends or a stop
// signal arrives, and shuts it down gracefully.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mockupstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr(getenv, "MOCKUPSTREAM_ADDR", "127.0.0.1:9090"), "listen address")
	latency := fs.Duration("latency", 0, "delay before every answer (env MOCKUPSTREAM_LATENCY)")
	chunks := fs.Int("chunks", 8, "content chunks per stream (env MOCKUPSTREAM_CHUNKS)")
	interval := fs.Duration("chunk-interval", 0, "spacing of stream chunks (env MOCKUPSTREAM_CHUNK_INTERVAL)")
	usage := fs.Int("usage-tokens", 30, "total tokens reported in usage (env MOCKUPSTREAM_USAGE_TOKENS)")
	models := fs.String("models", envOr(getenv, "MOCKUPSTREAM_MODELS", "mock-model"), "comma-separated models listed by /v1/models")
	if err := envDefaults(fs, getenv); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("mockupstream: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mockupstream: unexpected arguments %q", fs.Args())
	}
	if *latency < 0 || *interval < 0 || *chunks < 0 || *usage < 0 {
		return errors.New("mockupstream: durations and counts must not be negative")
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv := upstreamtest.NewServer(upstreamtest.Options{
		Latency:       *latency,
		Chunks:        *chunks,
		ChunkInterval: *interval,
		UsageTokens:   *usage,
		Models:        splitList(*models),
	})
	url, err := srv.Start(ctx, *addr)
	if err != nil {
		return fmt.Errorf("mockupstream: %w", err)
	}
	fmt.Fprintf(stdout, "mockupstream listening on %s/v1 (stats: %s/stats)\n", url, url)

	<-ctx.Done()
	// The serving context is over; the grace period needs a fresh one.
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("mockupstream: %w", err)
	}
	return nil
}

// envDefaults sets flag defaults from MOCKUPSTREAM_* variables before the
// command line is parsed, so flags still win.
func envDefaults(fs *flag.FlagSet, getenv func(string) string) error {
	for flagName, env := range map[string]string{
		"latency":        "MOCKUPSTREAM_LATENCY",
		"chunks":         "MOCKUPSTREAM_CHUNKS",
		"chunk-interval": "MOCKUPSTREAM_CHUNK_INTERVAL",
		"usage-tokens":   "MOCKUPSTREAM_USAGE_TOKENS",
	} {
		if v := getenv(env); v != "" {
			if err := fs.Set(flagName, v); err != nil {
				return fmt.Errorf("mockupstream: %s=%q: %w", env, v, err)
			}
		}
	}
	return nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
