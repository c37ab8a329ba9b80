package cluster

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestSharedTurnGivenBack: in cluster mode a key's (or connection's) rpm
// turn taken through Redis and then not used — its connection's turn came
// too late, the attempt was skipped — goes back to Redis, as the in-process
// spacing gives it back: the next request gets it at once instead of a
// minute later, on any replica. A turn is given back only while no later
// turn was reserved, so it is never granted twice.
func TestSharedTurnGivenBack(t *testing.T) {
	const id, spacing, bound = "key:kr", time.Minute, 200 * time.Millisecond
	prefix := uniquePrefix(t)
	var shs [2]*ratelimit.Shared
	var lims [2]*Limits
	for i := range shs {
		lim, err := NewLimits(LimitsOptions{Client: newClient(t, shared.sock), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		lims[i] = lim
		shs[i] = ratelimit.NewShared(lim, time.Now, slog.Default(), nil)
	}
	ctx := t.Context()
	turn := func(i int) ratelimit.Turn {
		return shs[i].Turn(ctx, id, &ratelimit.State{}, spacing, time.Now(), bound)
	}

	t1 := turn(0)
	if t1.Verdict != ratelimit.TurnTaken || !t1.Shared {
		t.Fatalf("first turn: %+v, want taken from the store", t1)
	}
	t1.GiveBack() // no dispatch followed
	t2 := turn(1)
	if t2.Verdict != ratelimit.TurnTaken {
		t.Fatalf("turn after a give-back on the other replica: verdict %d (wait %s), want taken at once", t2.Verdict, t2.Wait)
	}
	// t2 is used (dispatched): the next turn is a minute away, on either replica.
	if t3 := turn(0); t3.Verdict != ratelimit.TurnTooLate {
		t.Fatalf("turn after a used one: verdict %d, want too late", t3.Verdict)
	}

	// Only the latest turn goes back: a later reservation (another replica's
	// turn, a minute after t2's) keeps t2's give-back from freeing a turn
	// that was granted since.
	if _, ok, err := lims[1].ReserveTurn(ctx, id, spacing, -1); err != nil || !ok {
		t.Fatalf("ReserveTurn: ok %v, err %v", ok, err)
	}
	t2.GiveBack()
	wait, ok, err := lims[0].ReserveTurn(ctx, id, spacing, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok || wait < spacing+spacing/2 {
		t.Errorf("after giving back a turn that is not the latest: reserved %v, next turn in %s; want none within 1.5 min (two turns ahead)", ok, wait)
	}
	t2.GiveBack() // a second call does nothing
}

// TestKeyTurnGivenBackAcrossReplicas is gateway's TestKeyTurnGivenBack in
// cluster mode: a paced key's rpm turn, taken through Redis for an attempt
// whose connection turn then comes too late, is given back, so the key's
// next request — on the other replica — is refused at the connection's
// spacing again, not at its own (before: 429 at key-rpm:kr).
func TestKeyTurnGivenBackAcrossReplicas(t *testing.T) {
	e := newKeyGateways(t, 2, upstreamtest.Options{},
		clientKey("kr", limits.ClientKeyLimits{RPM: ptr(1)}), clientKey("ko", limits.ClientKeyLimits{}))
	e.apply(limits.Overrides{RPM: ptr(1), MaxWaitMs: ptr(100)}, "m")
	ctx := t.Context()
	if r := e.post(ctx, 0, "ko", "m"); r.status != http.StatusOK {
		t.Fatalf("another key's request: status %d (%s), want 200", r.status, r.code)
	}
	for i := range 2 {
		r := e.post(ctx, (i+1)%2, "kr", "m")
		if r.status != http.StatusTooManyRequests || r.header.Get(gateway.HeaderGate) != "rpm:a" {
			t.Errorf("request %d of the paced key = %d at %q, want 429 at rpm:a (its own turn given back)", i+1, r.status, r.header.Get(gateway.HeaderGate))
		}
	}
}
