package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// demoKeyFile keeps the demo client key in the data dir, so it survives restarts.
const demoKeyFile = "demo-client-key"

// demoUpstreamFile keeps the fake upstream's address in the data dir: the next start
// listens there again, so the demo connections' base URLs (and a config exported from
// them) stay the same across restarts.
const demoUpstreamFile = "demo-upstream-addr"

// demoConnection is one connection the demo creates (by name) against the fake upstream.
type demoConnection struct {
	name, provider, style string
	path                  string // appended to the fake upstream's URL
	models                []string
	priority              int
	overrides             string
}

var demoConnections = []demoConnection{
	{name: "zai-main", provider: "zai", style: "openai", path: "/v1", models: []string{"glm-5", "glm-4.7"}, priority: 10,
		overrides: `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"maxWaitMs":20000}`},
	{name: "zai-backup", provider: "zai", style: "openai", path: "/v1", models: []string{"glm-4.7"}, priority: 0,
		overrides: `{"maxConcurrent":2,"maxWaitMs":20000}`},
	{name: "openai-team", provider: "openai", style: "openai", path: "/v1", models: []string{"gpt-4o-mini"}, priority: 0,
		overrides: `{"maxConcurrent":6}`},
	{name: "anthropic-main", provider: "anthropic", style: "anthropic", path: "/v1", models: []string{"claude-sonnet-4"}, priority: 0,
		overrides: `{"maxConcurrent":2,"modelConcurrency":{"claude-sonnet-4":2}}`},
	{name: "gemini-main", provider: "google", style: "gemini", path: "/v1beta", models: []string{"gemini-2.5-flash"}, priority: 0,
		overrides: `{"maxConcurrent":4}`},
}

// startDemo runs the in-process fake upstream, points the demo connections at it and
// makes sure a demo client key exists (printed, with a demo-traffic command line for the
// gateway listening on addr).
func startDemo(ctx context.Context, st *store.Store, cfg *config, addr string, stdout io.Writer, logger *slog.Logger) (*upstreamtest.Server, error) {
	up := upstreamtest.NewServer(upstreamtest.Options{
		Latency:       400 * time.Millisecond,
		Chunks:        12,
		ChunkInterval: 80 * time.Millisecond,
		Models:        []string{"glm-5", "glm-4.7", "gpt-4o-mini", "claude-sonnet-4", "gemini-2.5-flash"},
	})
	base, err := startDemoUpstream(ctx, up, cfg.DataDir, logger)
	if err != nil {
		return nil, err
	}
	existing, err := st.ListConnections(ctx)
	if err != nil {
		_ = up.Close()
		return nil, fmt.Errorf("demo connections: %w", err)
	}
	byName := map[string]store.Connection{}
	for _, c := range existing {
		byName[c.Name] = c
	}
	for _, d := range demoConnections {
		url := base + d.path
		if c, ok := byName[d.name]; ok {
			// The fake upstream moved (its port was taken): repoint, keep the rest.
			if c.BaseURL == url {
				continue
			}
			_, err = st.UpdateConnection(ctx, store.ActorSystem, c.ID, 0, func(cur store.Connection) (store.ConnectionInput, error) {
				in := cur.Input()
				in.BaseURL = url
				return in, nil
			})
		} else {
			_, err = st.CreateConnection(ctx, store.ActorSystem, store.ConnectionInput{
				Name: d.name, Provider: d.provider, APIStyle: d.style, BaseURL: url,
				APIKey: "demo-" + d.name + "-" + randomPassword(), Models: d.models, Priority: d.priority,
				Enabled: true, RateLimitOverrides: json.RawMessage(d.overrides),
			})
		}
		if err != nil {
			_ = up.Close()
			return nil, fmt.Errorf("demo connection %s: %w", d.name, err)
		}
	}
	key, err := demoClientKey(cfg.DataDir)
	if err != nil {
		_ = up.Close()
		return nil, err
	}
	if _, err := st.EnsureClientKey(ctx, "demo", key); err != nil {
		_ = up.Close()
		return nil, fmt.Errorf("demo client key: %w", err)
	}
	logger.Info("demo upstream running", slog.String("url", base))
	fmt.Fprintf(stdout, "Demo client key: %s\n", key)
	fmt.Fprintf(stdout, "Demo traffic:    %s demo-traffic --url http://%s --key %s\n", os.Args[0], addr, key)
	return up, nil
}

// startDemoUpstream starts the fake upstream on the address it had last time (the data
// dir's demoUpstreamFile), else on a free loopback port, and records where it listens.
func startDemoUpstream(ctx context.Context, up *upstreamtest.Server, dataDir string, logger *slog.Logger) (string, error) {
	path := filepath.Join(dataDir, demoUpstreamFile)
	if b, err := os.ReadFile(path); err == nil {
		if addr := strings.TrimSpace(string(b)); addr != "" {
			base, err := up.Start(ctx, addr)
			if err == nil {
				return base, nil
			}
			logger.Warn("demo upstream: its last address is taken; the demo connections move to a new port",
				slog.String("addr", addr), slog.Any("error", err))
		}
	}
	base, err := up.Start(ctx, "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("demo upstream: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		_ = up.Close()
		return "", fmt.Errorf("demo upstream: %w", err)
	}
	if err := os.WriteFile(path, []byte(strings.TrimPrefix(base, "http://")+"\n"), 0o600); err != nil {
		_ = up.Close()
		return "", fmt.Errorf("demo upstream: %w", err)
	}
	return base, nil
}

// demoClientKey returns the data dir's demo client key, generating it on first use.
func demoClientKey(dataDir string) (string, error) {
	path := filepath.Join(dataDir, demoKeyFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if k := strings.TrimSpace(string(b)); len(k) >= store.MinBootstrapSecretLen {
			return k, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("demo client key: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("demo client key: %w", err)
	}
	k := store.ClientKeyPrefix + randomPassword()
	if err := os.WriteFile(path, []byte(k+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("demo client key: %w", err)
	}
	return k, nil
}

// randomPassword returns 16 random bytes, base64url encoded.
func randomPassword() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}
