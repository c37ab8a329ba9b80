package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// oomRedis makes a Redis refuse every write with OOM, as maxmemory 1 with
// noeviction does: a Redis that answers, with an error.
func oomRedis(t *testing.T, s *redisServer) {
	t.Helper()
	rdb := newClient(t, s.sock)
	if err := rdb.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(t.Context(), "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("a write under maxmemory 1 = %v, want an OOM error", err)
	}
}

// TestRedisErrorFollowsFailMode: a Redis that answers the acquire script
// with an error (OOM) is a Redis away: fail-closed answers
// *UnavailableError, fail-open admits within the replica's share (issue
// 24, finding 5: the raw error reached the gateway, which answered an
// empty 200).
func TestRedisErrorFollowsFailMode(t *testing.T) {
	srv := ownRedis(t)
	const gate = "connection:c1"
	prefix := uniquePrefix(t)
	var reps []*Controller
	for i := range 2 {
		// A lease TTL of 3 s renews every second: the first replica learns
		// of the second at its next renewal (the default's 5 s was the wait's
		// whole bound, and failed under load).
		c := newController(t, newClient(t, srv.sock), Options{Prefix: prefix, ReplicaID: fmt.Sprintf("r%d", i),
			Recheck: 100 * time.Millisecond, LeaseTTL: 3 * time.Second})
		c.SetCaps(map[string]int{gate: 4})
		reps = append(reps, c)
	}
	waitFor(t, 5*time.Second, "both replicas registered", func() bool { return reps[0].Replicas() == 2 && reps[1].Replicas() == 2 })
	closed := newController(t, newClient(t, srv.sock), Options{Prefix: uniquePrefix(t), FailMode: FailClosed})
	closed.SetCaps(map[string]int{gate: 4})
	oomRedis(t, srv)

	req := admission.Request{Gates: path(gate), MaxWait: 50 * time.Millisecond}
	if _, err := closed.Acquire(t.Context(), req); !errors.Is(err, admission.ErrUnavailable) {
		t.Errorf("fail-closed Acquire on an OOM Redis = %v, want CLUSTER_UNAVAILABLE", err)
	}
	got := takeAll(reps[0], req, 10)
	if len(got) != 2 {
		t.Errorf("fail-open replica admitted %d on an OOM Redis, want 2 (cap 4 ÷ 2 replicas)", len(got))
	}
	if !reps[0].Degraded() {
		t.Error("Degraded() = false on an OOM Redis")
	}
	releaseAll(got)
}

// TestGatewayOnOOMRedis: through real HTTP, a gateway whose Redis refuses
// writes with OOM never answers an empty 200: fail-closed 503
// CLUSTER_UNAVAILABLE with Retry-After, fail-open served (its share).
func TestGatewayOnOOMRedis(t *testing.T) {
	srv := ownRedis(t)
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(up)
	t.Cleanup(func() { _ = up.Close(); upSrv.Close() })
	urls := map[FailMode]string{}
	for _, mode := range []FailMode{FailClosed, FailOpen} {
		ctrl := newController(t, newClient(t, srv.sock), Options{Prefix: uniquePrefix(t), FailMode: mode})
		gw := gateway.New(gateway.Options{
			Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
				return gateway.ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
			},
			Admission: ctrl,
		})
		gw.Apply(gateway.Config{Connections: []gateway.Connection{{ID: "a", Name: "conn-a", Provider: "zai", APIStyle: "openai",
			BaseURL: upSrv.URL + "/v1", APIKey: "ka", Models: []string{"m"}, Enabled: true,
			Overrides: limits.Overrides{MaxConcurrent: ptr(4)}}}})
		s := httptest.NewServer(gw)
		t.Cleanup(func() { s.Close(); gw.Close() })
		urls[mode] = s.URL
	}
	oomRedis(t, srv)

	post := func(url string) (int, http.Header, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+testClientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	for i := range 3 {
		status, h, body := post(urls[FailClosed])
		if status != http.StatusServiceUnavailable || !strings.Contains(body, gateway.CodeClusterUnavailable) || h.Get("Retry-After") != "1" {
			t.Errorf("fail-closed request %d: %d Retry-After %q %s, want 503 %s with Retry-After 1",
				i, status, h.Get("Retry-After"), body, gateway.CodeClusterUnavailable)
		}
		status, _, body = post(urls[FailOpen])
		if status != http.StatusOK || !strings.Contains(body, `"choices"`) {
			t.Errorf("fail-open request %d: %d %q, want 200 with an answer", i, status, body)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}
