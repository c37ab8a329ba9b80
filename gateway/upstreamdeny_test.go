package gateway

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestUpstreamDeniedAtDial (issue 24, finding 4, dial half): a connection
// whose host name resolves into GATEHOUSE_UPSTREAM_DENY when the gateway
// dials it — after its baseUrl was written, say — is never connected to:
// 502 UPSTREAM_UNAVAILABLE naming the deny list, every time (a refusal is
// no upstream failure: the breaker stays closed), and the next connection
// serves. Names resolve through the gateway's lookup seam, no DNS.
func TestUpstreamDeniedAtDial(t *testing.T) {
	t.Parallel()
	deny, err := outbound.ParseDeny(outbound.DefaultDeny)
	if err != nil {
		t.Fatal(err)
	}
	var lookups atomic.Int64
	zones := map[string][]netip.Addr{
		"api.upstream.test":   {netip.MustParseAddr("127.0.0.1")},
		"later.upstream.test": {netip.MustParseAddr("169.254.169.254")},
	}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) {
		o.UpstreamDeny = deny
		o.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
			lookups.Add(1)
			if a, ok := zones[host]; ok {
				return a, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	})
	u, err := url.Parse(e.upURL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	denied := e.conn("d", "kd", "glm-5", "glm-4.7")
	denied.BaseURL = "http://later.upstream.test:" + port + "/v1"
	denied.Priority = 10
	literal := e.conn("l", "kl", "glm-4.6")
	literal.BaseURL = "http://169.254.169.254:" + port + "/v1"
	ok := e.conn("ok", "kok", "glm-5")
	ok.BaseURL = "http://api.upstream.test:" + port + "/v1"
	e.gw.Apply(Config{Settings: limits.Settings{BreakerFailures: ptr(2)}, Connections: []Connection{denied, literal, ok}})
	ctx := testCtx(t)

	for i := range 3 {
		for _, model := range []string{"glm-4.7", "glm-4.6"} {
			r := e.post(ctx, "/v1/chat/completions", chatBody(model, false))
			if r.status != http.StatusBadGateway || r.errorCode(t) != CodeUpstreamError || !strings.Contains(r.body, "GATEHOUSE_UPSTREAM_DENY") {
				t.Errorf("request %d for %s: status %d %s, want 502 %s naming the deny list", i, model, r.status, r.body, CodeUpstreamError)
			}
		}
	}
	// glm-5: the denied connection comes first, the allowed one serves.
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-ok")
	if n := e.up.Stats().Total.Requests; n != 1 {
		t.Errorf("the upstream saw %d requests, want 1 (denied addresses are never connected to)", n)
	}
	if n := lookups.Load(); n < 4 {
		t.Errorf("%d lookups, want the denied name looked up at each dial (>= 4)", n)
	}
	if h := e.health("d"); h.Health != "ok" {
		t.Errorf("denied connection's health %+v, want ok (a refusal is no upstream failure)", h)
	}
}

// TestUpstreamDenyLoopbackCoversUnspecified: a deny list with loopback (127.0.0.0/8)
// also refuses the unspecified addresses that reach the same listener — 0.0.0.0,
// another address of 0.0.0.0/8 and the IPv4-mapped ::ffff:0.0.0.0 — at dial (502,
// the upstream never reached), for requests and for the connection test alike.
func TestUpstreamDenyLoopbackCoversUnspecified(t *testing.T) {
	t.Parallel()
	deny, err := outbound.ParseDeny(outbound.DefaultDeny + ",127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.UpstreamDeny = deny })
	u, err := url.Parse(e.upURL)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	var conns []Connection
	hosts := map[string]string{"glm-a": "0.0.0.0", "glm-b": "0.0.0.1", "glm-c": "[::ffff:0.0.0.0]"}
	for model, host := range hosts {
		c := e.conn(model, "k-"+model, model)
		c.BaseURL = "http://" + host + ":" + port + "/v1"
		conns = append(conns, c)
	}
	e.gw.Apply(Config{Connections: conns})
	ctx := testCtx(t)
	for model, host := range hosts {
		r := e.post(ctx, "/v1/chat/completions", chatBody(model, false))
		if r.status != http.StatusBadGateway || !strings.Contains(r.body, "GATEHOUSE_UPSTREAM_DENY") {
			t.Errorf("%s: status %d %s, want 502 naming the deny list", host, r.status, r.body)
		}
		res, err := e.gw.Probe(ctx, model)
		if err != nil {
			t.Fatalf("Probe %s: %v", model, err)
		}
		if res.Status != http.StatusBadGateway {
			t.Errorf("connection test of %s: %+v, want 502 (refused at dial)", host, res)
		}
	}
	if n := e.up.Stats().Total.Requests; n != 0 {
		t.Errorf("the upstream saw %d requests through unspecified addresses, want 0", n)
	}
}
