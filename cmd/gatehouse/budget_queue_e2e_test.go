package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestSpentMoneyBudgetRefusedBeforeQueue: a key whose budgetUsdDaily is spent
// gets 429 BUDGET_EXCEEDED at once, without queueing for a permit it could
// not use. One gatehouse process on Postgres, a connection of maxConcurrent 1:
// the bootstrap key (budget $0.01) spends it with one request the upstream
// reports 10 000 tokens for ($0.04 at $4 per million); a second key's request
// then holds the only permit at the upstream. The spent key's next request is
// answered 429 while that permit is still held: no admission attempt, no
// queue entry, nothing at the upstream; and it is counted in
// gatehouse_ratelimit_rejections_total{limit="budgetUsdDaily"} and
// gatehouse_budget_rejections_total{budget="budgetUsdDaily"}.
func TestSpentMoneyBudgetRefusedBeforeQueue(t *testing.T) {
	t.Parallel()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "glm-4.7"}})
	p := serveOnURL(t, storetest.URL(t), store.GenerateSecretKey())
	createConnection(t, p, up.URL(), `{"maxConcurrent":1,"maxWaitMs":120000}`)
	apiDo(t, p, http.MethodPatch, "/api/v1/settings", `{"prices":{"zai/glm-5":{"input":4,"output":4}}}`, &map[string]any{})
	var keys struct {
		Items []struct {
			ID, Name string
		} `json:"items"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/client-keys", "", &keys)
	if len(keys.Items) != 1 {
		t.Fatalf("client keys = %+v, want the bootstrap key", keys.Items)
	}
	spent := keys.Items[0]
	apiDo(t, p, http.MethodPatch, "/api/v1/client-keys/"+spent.ID, `{"limits":{"budgetUsdDaily":0.01}}`, &map[string]any{})
	var other struct {
		Secret string `json:"secret"`
	}
	apiDo(t, p, http.MethodPost, "/api/v1/client-keys", `{"name":"team-b"}`, &other)
	waitFor(t, 10*time.Second, "the process to load the key's budget", func() bool {
		_, ok := gatehouseUSD(t, p)["budgetUsdDaily"]
		return ok
	})

	// Spend the budget: the estimate ($0.004) fits, the answer costs $0.04.
	if err := up.SetDefault(upstreamtest.Behavior{UsageTokens: 10_000}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if r, err := budgetPost(ctx, p, budgetBody("glm-5")); err != nil || r.status != http.StatusOK {
		t.Fatalf("the spending request = %d %s (%v), want 200", r.status, r.code, err)
	}
	waitFor(t, 10*time.Second, "the budget to be spent", func() bool {
		return gatehouseUSD(t, p)["budgetUsdDaily"].RemainingUSD == "0"
	})

	// Another key's request takes the connection's only permit and stays.
	hold := make(chan struct{})
	t.Cleanup(func() { closeOnce(hold) })
	if err := up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	held := make(chan chatReply, 1)
	go func() {
		r, _ := budgetPostAs(ctx, p, other.Secret, budgetBody("glm-5"))
		held <- r
	}()
	waitFor(t, 10*time.Second, "the other key's request at the upstream", func() bool { return up.InFlight() == 1 })
	attempts := metricValue(t, p, "gatehouse_admission_attempts_total")
	atUpstream := up.Requests(e2eUpstream, "glm-5")

	// The spent key: answered while the permit is held, so it never queued.
	refused := make(chan chatReply, 1)
	go func() {
		r, err := budgetPost(ctx, p, budgetBody("glm-5"))
		if err != nil {
			r.status = -1
		}
		refused <- r
	}()
	var r chatReply
	select {
	case r = <-refused:
	case <-ctx.Done():
		t.Fatal("no answer for the spent key while another request held the only permit: it queued")
	}
	if r.status != http.StatusTooManyRequests || r.code != gateway.CodeBudgetExceeded {
		t.Fatalf("the spent key's request = %d %s, want 429 BUDGET_EXCEEDED", r.status, r.code)
	}
	if got := metricValue(t, p, "gatehouse_admission_attempts_total"); got != attempts {
		t.Errorf("admission attempts %v → %v: the refused request was admitted or queued", attempts, got)
	}
	if got := metricValue(t, p, "gatehouse_gate_queued"); got != 0 {
		t.Errorf("gatehouse_gate_queued = %v, want 0", got)
	}
	if got := up.Requests(e2eUpstream, "glm-5"); got != atUpstream {
		t.Errorf("upstream requests %d → %d: the refused request was dispatched", atUpstream, got)
	}
	for _, m := range []string{
		`gatehouse_ratelimit_rejections_total{limit="budgetUsdDaily"}`,
		`gatehouse_budget_rejections_total{budget="budgetUsdDaily",client="` + spent.Name + `"}`,
	} {
		if got := metricValue(t, p, m); got != 1 {
			t.Errorf("%s = %v, want 1", m, got)
		}
	}
	closeOnce(hold)
	if r := <-held; r.status != http.StatusOK {
		t.Errorf("the other key's request = %d %s, want 200", r.status, r.code)
	}
}
