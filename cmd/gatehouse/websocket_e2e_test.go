package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestServeResponsesWebSocket: serve mounts the Responses WebSocket bridge
// (a turn on the socket is answered from the demo upstream) and closes an
// open socket with 1001 on SIGINT, then exits cleanly.
func TestServeResponsesWebSocket(t *testing.T) {
	t.Parallel()
	p := startServe(t, privateDir(t, nil), nil, []string{
		"GATEHOUSE_DATABASE_URL=" + storetest.URL(t),
		"GATEHOUSE_SECRET_KEY=" + store.GenerateSecretKey(),
		"GATEHOUSE_BOOTSTRAP_CLIENT_KEY=" + e2eClientKey,
	}, "--demo")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+e2eClientKey)
	c, _, err := websocket.Dial(ctx, "ws://"+p.addr+"/v1/responses", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer func() { _ = c.CloseNow() }()
	c.SetReadLimit(-1)
	msg := `{"type":"response.create","model":"gpt-4o-mini","input":[{"type":"message","role":"user","content":"hi"}]}`
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("turn: %v", err)
		}
		if strings.Contains(string(data), `"type":"response.completed"`) {
			break
		}
		if strings.HasPrefix(string(data), `{"type":"error"`) {
			t.Fatalf("turn failed: %s", data)
		}
	}
	closed := make(chan error, 1)
	go func() {
		_, _, err := c.Read(ctx)
		closed <- err
	}()
	p.interrupt(t, 30*time.Second)
	if err := <-closed; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("socket on shutdown: %v, want close 1001", err)
	}
}
