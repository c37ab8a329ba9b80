package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
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
