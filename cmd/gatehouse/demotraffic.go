package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// runDemoTraffic sends concurrent streaming and non-streaming requests through a running
// gateway so queues build up on the demo's caps.
func runDemoTraffic(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo-traffic", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := getenv("GATEHOUSE_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	dataDir := getenv("GATEHOUSE_DATA_DIR")
	if dataDir == "" {
		dataDir = "./gatehouse-data"
	}
	url := fs.String("url", "http://"+addr, "the gateway's base URL (default from GATEHOUSE_ADDR)")
	key := fs.String("key", getenv("GATEHOUSE_CLIENT_KEY"), "a client key (GATEHOUSE_CLIENT_KEY; default: the demo key in the data dir)")
	fs.StringVar(&dataDir, "data-dir", dataDir, "the data dir of gatehouse serve --demo, where the demo key is (GATEHOUSE_DATA_DIR)")
	concurrency := fs.Int("concurrency", 16, "requests in flight at once")
	duration := fs.Duration("duration", 30*time.Second, "how long to send")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *key == "" {
		b, err := os.ReadFile(filepath.Join(dataDir, demoKeyFile))
		if err != nil {
			return errors.New("demo-traffic: no client key: pass --key, or --data-dir (GATEHOUSE_DATA_DIR) of gatehouse serve --demo")
		}
		*key = strings.TrimSpace(string(b))
	}
	// One request first: a gateway that cannot be reached (a wrong --url, no serve
	// running) is an error naming why, not thirty seconds of counted failures.
	if err := probeGateway(ctx, *url); err != nil {
		return fmt.Errorf("demo-traffic: cannot reach the gateway at %s: %w", *url, err)
	}
	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()

	type call struct{ path, model, style string }
	calls := []call{
		{"/v1/chat/completions", "zai/glm-5", "openai"},
		{"/v1/chat/completions", "glm-4.7", "openai"},
		{"/v1/chat/completions", "zai/glm-4.7", "openai"},
		{"/v1/chat/completions", "gpt-4o-mini", "openai"},
		{"/v1/messages", "claude-sonnet-4", "anthropic"},
	}
	client := &http.Client{Timeout: 2 * time.Minute}
	var mu sync.Mutex
	counts := map[string]int{}
	var firstErr error
	var wg sync.WaitGroup
	for w := range *concurrency {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i += *concurrency {
				c := calls[i%len(calls)]
				stream := i%2 == 0
				body := fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":64,"messages":[{"role":"user","content":"hello from demo-traffic"}]}`, c.model, stream)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url+c.path, bytes.NewBufferString(body))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", "application/json")
				if c.style == "anthropic" {
					req.Header.Set("x-api-key", *key)
					req.Header.Set("anthropic-version", "2023-06-01")
				} else {
					req.Header.Set("Authorization", "Bearer "+*key)
				}
				resp, err := client.Do(req)
				label := ""
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					label = "error"
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					label = fmt.Sprintf("%d %s", resp.StatusCode, c.model)
				}
				mu.Lock()
				counts[label]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(stdout, "responses by status and model:")
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %-28s %d\n", k, counts[k])
	}
	if n := counts["error"]; n > 0 && n == total(counts) {
		return fmt.Errorf("demo-traffic: every request failed; the first: %w", firstErr)
	}
	return nil
}

// total is the sum of counts' values.
func total(counts map[string]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// probeGateway sends one GET /healthz to the gateway at url: an error when it cannot
// be reached or does not answer 200.
func probeGateway(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthz answered %s", resp.Status)
	}
	return nil
}
