package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestRedisLoggingIsJSON: a go-redis message through the adapter is one JSON line at
// level WARN, marked as go-redis's, its text without the trailing newline.
func TestRedisLoggingIsJSON(t *testing.T) {
	var buf bytes.Buffer
	logger, err := newLogger("info", &buf)
	if err != nil {
		t.Fatal(err)
	}
	redisLogging{logger: logger}.Printf(t.Context(), "redis: connection pool: failed to dial after %d attempts: %v\n", 5, "connection refused")
	var line struct {
		Level, Msg, Component string
	}
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	want := "redis: connection pool: failed to dial after 5 attempts: connection refused"
	if line.Level != "WARN" || line.Msg != want || line.Component != "go-redis" {
		t.Errorf("logged %+v, want level WARN, msg %q, component go-redis", line, want)
	}
}
