package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
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

// TestNewClientKeyAuthenticatesAtOnce: a client key created a moment ago (by `gatehouse
// key create` in another process, the API or the dashboard) works on the very next
// request, before the NOTIFY reload has brought it into the in-memory set; a deleted
// key stops working with the next reload; unknown keys stay unknown.
func TestNewClientKeyAuthenticatesAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	logger := slog.New(slog.DiscardHandler)
	key, err := store.ParseSecretKey(store.GenerateSecretKey())
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.New(storetest.Pool(t), key, logger)
	if err != nil {
		t.Fatal(err)
	}
	loader := newConfigLoader(st, logger)
	gw := gateway.New(gateway.Options{Logger: logger, Authenticate: loader.authenticate})
	t.Cleanup(gw.Close)
	loader.gw = gw
	if err := loader.reload(ctx); err != nil {
		t.Fatalf("reload: %v", err)
	}

	k, secret, err := st.CreateClientKey(ctx, store.ActorSystem, store.NewClientKeyInput("fresh"))
	if err != nil {
		t.Fatalf("CreateClientKey: %v", err)
	}
	// No reload in between: the loader's run loop is not running in this test.
	if !authOK(loader, ctx, secret) {
		t.Fatal("authenticate(new key) = false before the reload, want true")
	}
	if !authOK(loader, ctx, secret) {
		t.Fatal("authenticate(new key) = false on the second request, want true")
	}
	if authOK(loader, ctx, "gh_ck_not-a-key-0123456789") {
		t.Fatal("authenticate(unknown key) = true, want false")
	}

	if err := st.DeleteClientKey(ctx, store.ActorSystem, k.ID, 0); err != nil {
		t.Fatalf("DeleteClientKey: %v", err)
	}
	if err := loader.reload(ctx); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if authOK(loader, ctx, secret) {
		t.Fatal("authenticate(deleted key) = true after the reload, want false")
	}
}

// authOK reports whether the loader's key cache accepts secret.
func authOK(l *configLoader, ctx context.Context, secret string) bool {
	_, ok := l.authenticate(ctx, secret)
	return ok
}
