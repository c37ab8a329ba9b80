package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Models served by the fake upstream. benchModel's connection has caps far
// above any concurrency the harness uses, so admission never binds; queueModel
// sits behind a cap-1 gate for the queueing scenario.
const (
	benchModel = "bench-model"
	queueModel = "queue-model"
)

// connectionSpec is the body of POST /api/v1/connections (DESIGN.md, REST API).
type connectionSpec struct {
	Name               string         `json:"name"`
	Provider           string         `json:"provider"`
	APIStyle           string         `json:"apiStyle"`
	BaseURL            string         `json:"baseUrl"`
	APIKey             string         `json:"apiKey"`
	Models             []string       `json:"models"`
	RateLimitOverrides map[string]any `json:"rateLimitOverrides"`
}

// benchConnections returns the two connections the harness creates.
func benchConnections(upstreamBase, queueUpstreamBase, upstreamKey string, queueWait time.Duration) []connectionSpec {
	return []connectionSpec{
		{
			Name: "bench", Provider: "mock", APIStyle: "openai", BaseURL: upstreamBase,
			APIKey: upstreamKey, Models: []string{benchModel},
			// Real gates on the path (connection and model), caps that never bind.
			RateLimitOverrides: map[string]any{
				"maxConcurrent":    10000,
				"modelConcurrency": map[string]int{benchModel: 10000},
				"maxWaitMs":        30000,
			},
		},
		{
			Name: "bench-queue", Provider: "mock", APIStyle: "openai", BaseURL: queueUpstreamBase,
			APIKey: upstreamKey, Models: []string{queueModel},
			RateLimitOverrides: map[string]any{
				"maxConcurrent":    1,
				"modelConcurrency": map[string]int{queueModel: 1},
				"maxWaitMs":        queueWait.Milliseconds(),
			},
		},
	}
}

// createConnection POSTs spec to the REST API with the admin token.
func createConnection(ctx context.Context, client *http.Client, gatehouseURL, apiToken string, spec connectionSpec) error {
	body, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("bench: encode connection: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gatehouseURL+"/api/v1/connections", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("bench: create connection: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("bench: create connection %s: %w", spec.Name, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: create connection %s: %s: %s", spec.Name, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// waitFor polls check every 100 ms until it returns nil or timeout passes,
// and returns check's last error in that case.
func waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bench: waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// expectStatus makes a request and returns an error unless it answers want.
func expectStatus(ctx context.Context, client *http.Client, method, url, auth string, body []byte, want int) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if auth != "" {
		req.Header.Set("Authorization", "Bearer "+auth)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// chatBody returns a small chat completion request for model.
func chatBody(model string, stream bool) []byte {
	s := `{"model":"` + model + `","messages":[{"role":"user","content":"Say hello to the benchmark."}]`
	if stream {
		s += `,"stream":true`
	}
	return []byte(s + "}")
}

// start launches the fake upstream and Gatehouse and creates the connections.
// The returned cleanup stops both (Gatehouse by SIGINT, so it stops its
// managed Postgres) and is never nil.
func start(ctx context.Context, o options, tmp, out, gatehouseBin, upstreamBin string, childEnv []string, stderr io.Writer) (*env, func() error, error) {
	e := &env{
		apiToken: secret(), clientKey: secret(), upstreamKey: "sk-bench-" + secret(), bin: gatehouseBin,
	}
	cleanup := func() error {
		var errs []error
		if e.gatehouse != nil {
			fmt.Fprintln(stderr, "bench: stopping gatehouse (SIGINT) ...")
			errs = append(errs, e.gatehouse.shutdown(30*time.Second))
		}
		if e.upstream != nil {
			errs = append(errs, e.upstream.shutdown(15*time.Second))
		}
		if e.queueUpstream != nil {
			errs = append(errs, e.queueUpstream.shutdown(15*time.Second))
		}
		errs = append(errs, removeOutsideCluster(filepath.Join(tmp, "data"), tmp))
		errs = append(errs, e.stopCluster(tmp))
		errs = append(errs, e.stopNoLog(tmp))
		return errors.Join(errs...)
	}

	up, line, err := startChild(ctx, "mockupstream", upstreamBin,
		[]string{"-addr", "127.0.0.1:0", "-latency", "0s", "-chunks", "20", "-chunk-interval", "0s",
			"-models", benchModel},
		childEnv, syscall.SIGTERM, filepath.Join(out, "mockupstream.log"), "mockupstream listening on ")
	if err != nil {
		return e, cleanup, err
	}
	e.upstream = up
	e.upstreamBase = strings.Fields(line)[0]
	qup, line, err := startChild(ctx, "mockupstream", upstreamBin,
		[]string{"-addr", "127.0.0.1:0", "-latency", "1ms", "-models", queueModel},
		childEnv, syscall.SIGTERM, filepath.Join(out, "mockupstream-queue.log"), "mockupstream listening on ")
	if err != nil {
		return e, cleanup, err
	}
	e.queueUpstream = qup
	e.queueUpstreamBase = strings.Fields(line)[0]

	gh, url, err := e.startGatehouse(ctx, o, "gatehouse", filepath.Join(tmp, "data"), "", o.logOn(), out, gatehouseBin, childEnv)
	if gh != nil {
		e.gatehouse, e.gatehouseURL = gh, url
	}
	if err != nil {
		return e, cleanup, err
	}
	fmt.Fprintf(stderr, "bench: gatehouse %s (pid %d), upstream %s (pid %d); logs in %s\n",
		e.gatehouseURL, gh.pid(), e.upstreamBase, up.pid(), out)
	client, tr := newClient(4, 10*time.Second)
	defer tr.CloseIdleConnections()
	if err := expectStatus(ctx, client, http.MethodPost, e.upstreamBase+"/chat/completions", e.upstreamKey, chatBody(benchModel, false), http.StatusOK); err != nil {
		return e, cleanup, fmt.Errorf("bench: direct request to the upstream: %w", err)
	}
	if o.requestLog == "both" {
		if err := e.startNoLog(ctx, o, tmp, out, gatehouseBin, childEnv); err != nil {
			return e, cleanup, err
		}
		fmt.Fprintf(stderr, "bench: gatehouse with the request log off %s (pid %d)\n", e.noLogURL, e.noLog.pid())
	}
	if o.cluster {
		if err := e.startCluster(ctx, o, tmp, out, gatehouseBin, childEnv); err != nil {
			return e, cleanup, err
		}
		fmt.Fprintf(stderr, "bench: cluster-mode gatehouse %s (pid %d) on redis-server (pid %d)\n",
			e.clusterURL, e.cluster.pid(), e.redis.pid())
	}
	return e, cleanup, nil
}

// logOn is GATEHOUSE_REQUEST_LOG of the Gatehouse measured as "gatehouse" and
// of the cluster-mode one: on unless -request-log off.
func (o options) logOn() string {
	if o.requestLog == "off" {
		return "off"
	}
	return "on"
}

// startGatehouse starts a Gatehouse named name (its log is <name>.log) on its
// own data dir (a managed Postgres), in cluster mode on redisURL when that is
// set, waits until it is ready and creates the benchmark's connections. The
// child is returned as soon as it runs, so the caller can stop it on error.
func (e *env) startGatehouse(ctx context.Context, o options, name, dataDir, redisURL, requestLog, out, bin string, childEnv []string) (*child, string, error) {
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		return nil, "", fmt.Errorf("bench: data dir: %w", err)
	}
	ghEnv := append(slices.Clone(childEnv),
		"GATEHOUSE_DATABASE_URL=", "GATEHOUSE_REDIS_URL="+redisURL,
		"GATEHOUSE_DATA_DIR="+dataDir, "GATEHOUSE_ADDR=127.0.0.1:0", "GATEHOUSE_LOG_LEVEL=info",
		"GATEHOUSE_BOOTSTRAP_API_TOKEN="+e.apiToken, "GATEHOUSE_BOOTSTRAP_CLIENT_KEY="+e.clientKey,
		"GATEHOUSE_OUTBOUND="+o.outbound, "GATEHOUSE_REQUEST_LOG="+requestLog)
	startCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	gh, line, err := startChild(startCtx, name, bin, []string{"serve"}, ghEnv,
		syscall.SIGINT, filepath.Join(out, name+".log"), "Gatehouse is listening on ")
	if err != nil {
		return nil, "", err
	}
	url := strings.TrimSpace(line)
	client, tr := newClient(4, 10*time.Second)
	defer tr.CloseIdleConnections()
	if err := waitFor(ctx, time.Minute, name+" /readyz", func(ctx context.Context) error {
		return expectStatus(ctx, client, http.MethodGet, url+"/readyz", "", nil, http.StatusOK)
	}); err != nil {
		return gh, url, err
	}
	for _, spec := range benchConnections(e.upstreamBase, e.queueUpstreamBase, e.upstreamKey, o.queueWait) {
		if err := createConnection(ctx, client, url, e.apiToken, spec); err != nil {
			return gh, url, err
		}
	}
	// The gateway picks the new connections up through NOTIFY; wait until both route.
	for _, model := range []string{benchModel, queueModel} {
		if err := waitFor(ctx, 30*time.Second, name+" route to "+model, func(ctx context.Context) error {
			return expectStatus(ctx, client, http.MethodPost, url+"/v1/chat/completions", e.clientKey, chatBody(model, false), http.StatusOK)
		}); err != nil {
			return gh, url, err
		}
	}
	return gh, url, nil
}
