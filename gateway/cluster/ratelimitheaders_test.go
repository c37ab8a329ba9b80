package cluster

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestSharedRateLimitHeaderCooldown: an answer through gateway A whose
// rate-limit headers say the account is spent makes gateway B keep off the
// connection, for every model, until the reset.
func TestSharedRateLimitHeaderCooldown(t *testing.T) {
	for _, tc := range coolCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCoolingPair(t, tc.withB)
			// A reset long enough that B asks inside it, also on a loaded machine.
			if err := e.up.SetKeyBehavior("ka", upstreamtest.Behavior{Header: http.Header{
				"x-ratelimit-remaining-requests": {"0"}, "x-ratelimit-reset-requests": {"5s"}}}); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if r := e.post(ctx, 0); r.status != http.StatusOK || r.header.Get(gateway.HeaderConnection) != "conn-a" {
				t.Fatalf("gateway A: status %d via %q, want 200 via conn-a", r.status, r.header.Get(gateway.HeaderConnection))
			}
			if err := e.up.SetKeyBehavior("ka", upstreamtest.Behavior{}); err != nil {
				t.Fatal(err)
			}
			r := e.post(ctx, 1)
			if r.status != tc.wantStatus || r.code != tc.wantCode {
				t.Fatalf("gateway B while a cools: status %d code %q, want %d %q", r.status, r.code, tc.wantStatus, tc.wantCode)
			}
			if tc.withB {
				if got := r.header.Get(gateway.HeaderConnection); got != "conn-b" {
					t.Errorf("gateway B served by %q, want conn-b", got)
				}
			} else if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 6 { // whole seconds, rounded up from the shared deadline
				t.Errorf("Retry-After = %q, want 1 to 6 (the 5 s reset, rounded up)", r.header.Get("Retry-After"))
			}
			if got := e.up.Requests("ka", "m"); got != 1 {
				t.Fatalf("gateway B tried a while it cooled (a has %d requests)", got)
			}
			// After the reset, gateway B uses a again.
			waitFor(t, 15*time.Second, "gateway B to use a again", func() bool {
				return e.post(ctx, 1).status == http.StatusOK && e.up.Requests("ka", "m") == 2
			})
		})
	}
}
