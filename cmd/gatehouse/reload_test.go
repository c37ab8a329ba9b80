package main

import (
	"strings"
	"testing"
	"time"
)

// TestReadiness: /readyz is 503 only before the first config load; after it, 200 also
// while reloads fail (the database is away), saying how stale the config is.
func TestReadiness(t *testing.T) {
	t.Parallel()
	l := &configLoader{}
	if ok, detail := l.ready(); ok || !strings.Contains(detail, "no gateway config loaded") {
		t.Fatalf("before any load: ready() = %v, %q; want false and a reason", ok, detail)
	}
	l.loadedAt.Store(time.Now().Add(-5 * time.Second).UnixNano())
	if ok, detail := l.ready(); !ok || !strings.Contains(detail, "config loaded 5s ago") {
		t.Fatalf("after a load: ready() = %v, %q; want true and the config's age", ok, detail)
	}
	l.failing.Store(true)
	if ok, detail := l.ready(); !ok || !strings.Contains(detail, "database unreachable") {
		t.Fatalf("database away: ready() = %v, %q; want true, saying the database is unreachable", ok, detail)
	}
}
