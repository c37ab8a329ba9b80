package gateway

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestProbe: a test request goes through the connection it names — its gate admits
// it, the upstream gets that connection's key — and reports the answer's text, or
// the upstream's error code, never failing over to another connection of the model.
func TestProbe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	good, bad := e.conn("good", "key-good", "glm-5"), e.conn("bad", "key-bad", "glm-5")
	bad.Priority = 10 // a client request would try bad first, then fail over
	claude := e.conn("claude", "key-claude", "claude-x")
	claude.APIStyle = "anthropic"
	off := e.conn("off", "key-off", "glm-5")
	off.Enabled = false
	e.gw.Apply(Config{Connections: []Connection{good, bad, claude, off}})
	if err := e.up.SetKeyBehavior("key-bad", upstreamtest.Behavior{Fail: "401"}); err != nil {
		t.Fatal(err)
	}

	res, err := e.gw.Probe(t.Context(), "good")
	if err != nil {
		t.Fatalf("probe good: %v", err)
	}
	if !res.OK() || res.Status != http.StatusOK || !strings.HasPrefix(res.Text, "Hello") || res.Model != "glm-5" || res.Code != "" || res.Latency <= 0 {
		t.Errorf("probe good = %+v, want 200 with the fake upstream's text", res)
	}
	if got := e.gate("connection:good").Admitted; got != 1 {
		t.Errorf("the good connection's gate admitted %d, want the probe", got)
	}
	if got := e.gate("connection:bad").Admitted; got != 0 {
		t.Errorf("the bad connection's gate admitted %d, want 0", got)
	}

	res, err = e.gw.Probe(t.Context(), "bad")
	if err != nil {
		t.Fatalf("probe bad: %v", err)
	}
	if res.OK() || res.Status != http.StatusUnauthorized || res.Code != "invalid_api_key" || res.Message == "" {
		t.Errorf("probe bad = %+v, want the upstream's 401 invalid_api_key (no failover to good)", res)
	}
	if got := e.gate("connection:good").Admitted; got != 1 {
		t.Errorf("the bad connection's probe reached the good one (%d admitted)", got)
	}

	res, err = e.gw.Probe(t.Context(), "claude")
	if err != nil || res.Status != http.StatusOK || !strings.HasPrefix(res.Text, "Hello") {
		t.Errorf("probe an Anthropic-style connection = %+v, %v", res, err)
	}
	stats := e.up.Stats()
	if stats.ByKey["key-claude"].Requests != 1 {
		t.Errorf("the upstream saw %v requests by key, want one with key-claude", stats.ByKey)
	}

	for _, tt := range []struct {
		id   string
		want error
	}{{"off", ErrProbeDisabled}, {"nope", ErrProbeUnknown}} {
		if _, err := e.gw.Probe(t.Context(), tt.id); !errors.Is(err, tt.want) {
			t.Errorf("probe %s: %v, want %v", tt.id, err, tt.want)
		}
	}
}
