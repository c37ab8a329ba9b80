package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRunServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	env := map[string]string{"MOCKUPSTREAM_CHUNKS": "2"}
	go func() {
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-usage-tokens", "9"}, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
		errc <- err
	}()

	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("read banner: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	fields := strings.Fields(line)
	if len(fields) < 4 || !strings.HasPrefix(fields[3], "http://127.0.0.1:") || !strings.HasSuffix(fields[3], "/v1") {
		t.Fatalf("banner %q: want the base URL as fourth word", line)
	}
	base := fields[3]

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/chat/completions", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	// Flags and environment reach the server: 2 chunks of text, 9 tokens.
	for _, want := range []string{`"content":"Hello from"`, `"total_tokens":9`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body %s lacks %s", body, want)
		}
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{name: "unknown flag", args: []string{"-nope"}},
		{name: "extra argument", args: []string{"serve"}},
		{name: "negative latency", args: []string{"-latency", "-1s"}},
		{name: "bad env", env: map[string]string{"MOCKUPSTREAM_CHUNKS": "many"}},
		{name: "bad address", args: []string{"-addr", "256.0.0.1:x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), "mockupstream: ") {
				t.Errorf("run error = %v, want a mockupstream: error", err)
			}
			if errors.Is(err, context.Canceled) {
				t.Errorf("run error = %v, not a validation error", err)
			}
		})
	}
}
