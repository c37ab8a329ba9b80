package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// BenchmarkGatewayAdmit measures admission only, through the gateway's own
// types: an exchange for a request on a one-connection config chooses its
// connection (health, budgets, breaker, the admitter) and gives the permit
// back, as attempt does. It must not allocate.
// Run with: go test -run '^$' -bench GatewayAdmit -benchmem ./gateway/
func BenchmarkGatewayAdmit(b *testing.B) {
	gw := New(Options{Outbound: *testOutbound, Authenticate: func(context.Context, string) (ClientKey, bool) { return ClientKey{}, true }})
	defer gw.Close()
	gw.Apply(Config{Connections: []Connection{{
		ID: "6f1c2a9e-5b7d-4c1e-9a3f-2d8b7e6c5a41", Name: "bench", Provider: "zai", APIStyle: "openai",
		BaseURL: "http://127.0.0.1:1/v1", APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
		Overrides: caps(256, map[string]int{"glm-5": 256}, 60000),
	}}})
	s := gw.state.Load()
	x := &exchange{g: gw, s: s, rt: route.Chat, st: wire.OpenAI,
		r:       httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader("{}")),
		targets: s.routes[wire.OpenAI]["glm-5"]}
	x.info.Model = "glm-5"
	x.key = gw.keyOf(s, ClientKey{ID: "bench-key", Name: "bench", Enabled: true})
	if len(x.targets) != 1 {
		b.Fatalf("%d targets, want 1", len(x.targets))
	}
	t := x.targets[0]
	b.Run("tryAdmit", func(b *testing.B) {
		// The admission calls choose makes for a request admitted at once:
		// the permit lands in the exchange and goes back as attempt gives it.
		b.ReportAllocs()
		for b.Loop() {
			x.slotUsed = false // a new request's exchange
			pm, ok := x.tryAdmit(t.req)
			if !ok {
				b.Fatal("not admitted")
			}
			p := pick{t: t, permit: pm, done: noBreaker}
			p.permit.Release()
		}
	})
	b.Run("admit", func(b *testing.B) {
		// The same through the waiting entry point, as queue calls it
		// (waitRequest, AcquireInto), admitted at once.
		ctx := x.r.Context()
		b.ReportAllocs()
		for b.Loop() {
			x.slotUsed = false
			x.waitRequest(0)
			if err := gw.local.AcquireInto(ctx, x.qReq, &x.slot); err != nil {
				b.Fatal(err)
			}
			x.key.Carry.Queued[1].Add(-1)
			p := pick{t: t, permit: &x.slot, done: noBreaker}
			p.permit.Release()
		}
	})
	b.Run("choose", func(b *testing.B) {
		// The whole choice: health, budgets, the breaker (gobreaker's Allow
		// allocates its callback) and admission.
		b.ReportAllocs()
		for b.Loop() {
			x.slotUsed = false
			aerr := x.choose()
			p := x.cur
			if aerr != nil || p.t == nil {
				b.Fatalf("choose = %v", aerr)
			}
			p.done(nil)
			p.permit.Release()
		}
	})
}
