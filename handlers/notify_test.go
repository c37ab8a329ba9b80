package handlers

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestWritesNotify: every successful configuration write through the API goes out on
// NOTIFY gatehouse_config.
func TestWritesNotify(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	_, wait := listenChanges(t, a)

	id := a.createConnection(t, connectionBody("notify"))["id"].(string)
	wait("create connection")
	got := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)
	a.do(t, call{method: http.MethodPut, path: path("connections", id), body: got.body}).want(t, http.StatusOK)
	wait("put connection")
	a.do(t, call{method: http.MethodPatch, path: path("connections", id), body: `{"rateLimitOverrides":{"rpm":10}}`}).
		want(t, http.StatusOK)
	wait("patch connection")
	a.do(t, call{method: http.MethodPatch, path: path("settings"), body: `{"maxAttempts":2}`}).want(t, http.StatusOK)
	wait("patch settings")
	key := a.do(t, call{method: http.MethodPost, path: path("client-keys"), body: `{"name":"n"}`}).
		want(t, http.StatusCreated).json(t)
	wait("create client key")
	a.do(t, call{method: http.MethodDelete, path: path("client-keys", key["id"].(string))}).want(t, http.StatusNoContent)
	wait("delete client key")
	a.do(t, call{method: http.MethodDelete, path: path("connections", id)}).want(t, http.StatusNoContent)
	wait("delete connection")
}

// listenChanges listens for NOTIFY gatehouse_config on a's store until the test ends.
// It returns once the LISTEN is in place, with the notifications still unread and a
// wait for the next one, which fails the test after 10 s naming what it waited for.
func listenChanges(t *testing.T, a *testAPI) (changes <-chan struct{}, wait func(what string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan struct{}, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = a.store.ListenConfig(ctx, func() { ch <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	wait = func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification for %s", what)
		}
	}
	wait("LISTEN established") // ListenConfig reports its first LISTEN as a change
	return ch, wait
}
