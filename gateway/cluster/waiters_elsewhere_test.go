package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// scriptOnlyClient is a Redis client that is not a *redis.Client: a replica on it
// admits through admit.lua, never the MULTI/EXEC transaction (admitTx).
type scriptOnlyClient struct{ *redis.Client }

// TestAdmitRespectsWaiterParkedOnOtherReplica: a waiter parked on replica A, then
// the gate's slot freed without waking anybody (the holder's lease gone, as when
// it expires): a newcomer on replica B, which has never seen the gate busy, must
// not be admitted past A's waiter — the admission reads who waits on the gate in
// Redis, not only this replica's view. Deterministic: A's re-check is a minute
// away and nothing is published, so the waiter stays parked while B asks. Both
// ways of admitting: the transaction and the script.
func TestAdmitRespectsWaiterParkedOnOtherReplica(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(*redis.Client) redis.UniversalClient
	}{
		{"transaction", func(c *redis.Client) redis.UniversalClient { return c }},
		{"script", func(c *redis.Client) redis.UniversalClient { return scriptOnlyClient{c} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const gate = "connection:c1"
			opts := Options{Prefix: uniquePrefix(t), Recheck: time.Minute}
			opts.ReplicaID = "a"
			a := newController(t, newClient(t, shared.sock), opts)
			opts.ReplicaID = "b"
			b := newController(t, tc.client(newClient(t, shared.sock)), opts)
			for _, c := range []*Controller{a, b} {
				c.SetCaps(map[string]int{gate: 1})
			}
			if _, tx := b.rdb.(*redis.Client); tx != (tc.name == "transaction") {
				t.Fatalf("B admits by transaction: %v, want %v", tx, tc.name == "transaction")
			}
			channel := a.keys.channel(gate)
			waitFor(t, 5*time.Second, "both replicas subscribed", func() bool {
				n, err := a.rdb.PubSubNumSub(t.Context(), channel).Result()
				return err == nil && n[channel] == 2
			})
			req := admission.Request{Gates: path(gate), MaxWait: 30 * time.Second}
			holder := mustTryAcquire(t, a, req)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			waiting := acquireAsync(ctx, a, req)
			waitFor(t, 5*time.Second, "waiter parked on A", func() bool {
				n, err := a.rdb.HGet(t.Context(), a.keys.queued, gate).Int()
				return err == nil && n == 1
			})
			// The transaction is taken once B knows Redis's clock.
			waitFor(t, 5*time.Second, "B knows Redis's clock", b.clockKnown.Load)

			if err := a.rdb.Del(t.Context(), a.keys.holders(gate)).Err(); err != nil {
				t.Fatalf("free the slot: %v", err)
			}
			if g, ok := b.TryAcquire(req); ok {
				g.Release()
				t.Fatal("B admitted a newcomer past the waiter parked on A")
			}

			// Done: the waiter leaves (or, woken by B's taken-back lease in the
			// transaction's way, releases what it got).
			cancel()
			select {
			case r := <-waiting:
				if r.err == nil {
					r.p.Release()
				}
			case <-time.After(5 * time.Second):
				t.Fatal("A's waiter did not end after its context was cancelled")
			}
			holder.Release()
		})
	}
}
