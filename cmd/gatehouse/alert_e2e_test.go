package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestAlertOnceAcrossReplicas: two replicas share Postgres and Redis and a
// key's budgetUsdDaily of $0.04, each request costing $0.004. Replica A's
// 8 requests reach 80 % and replica B's next one finds it at 90 %: both
// emit budget.threshold "daily 80%" (each replica's metric counts it), and
// the local receiver gets it once; B's 10th request reaches 100 %, a
// second alert. Every delivery is recorded delivered in alert_deliveries.
func TestAlertOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []map[string]any
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("alert body %q: %v", b, err)
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	defer recv.Close()
	received := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), got...)
	}

	rs := startRedis(t)
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5"}, UsageTokens: 1000})
	a := serveClustered(t, dbURL, secret, rs.url(), "fail-open")
	b := serveClustered(t, dbURL, secret, rs.url(), "fail-open")
	apiDo(t, a, http.MethodPatch, "/api/v1/settings",
		`{"alerts":[{"name":"ops","url":"`+recv.URL+`","format":"json","events":["budget.threshold"]}]}`, &map[string]any{})
	setUpBudget(t, []*proc{a, b}, up.URL(), `{"budgetUsdDaily":0.04}`, "budgetUsdDaily")
	ctx := t.Context()
	post := func(p *proc, i int) {
		t.Helper()
		if r, err := budgetPost(ctx, p, budgetBody("glm-5")); err != nil || r.status != http.StatusOK {
			t.Fatalf("request %d = %d %s (%v), want 200", i, r.status, r.code, err)
		}
	}
	for i := range 8 {
		post(a, i+1)
	}
	waitFor(t, 10*time.Second, "the 80 % alert", func() bool { return len(received()) == 1 })
	post(b, 9)
	waitFor(t, 10*time.Second, "replica B to emit the 80 % alert too", func() bool {
		return metricValue(t, b, "gatehouse_alerts_emitted_total") >= 1
	})
	post(b, 10)
	waitFor(t, 10*time.Second, "the 100 % alert", func() bool { return len(received()) >= 2 })
	// Every claim is settled before B's next alert is dispatched (one queue),
	// so a duplicate of the 80 % alert would have been claimed by now.
	var alerts struct {
		Deliveries []store.AlertDelivery `json:"deliveries"`
	}
	waitFor(t, 10*time.Second, "both deliveries recorded delivered", func() bool {
		apiDo(t, b, http.MethodGet, "/api/v1/alerts", "", &alerts)
		return len(alerts.Deliveries) == 2 && alerts.Deliveries[0].Status == "delivered" && alerts.Deliveries[1].Status == "delivered"
	})
	var conds []string
	for _, m := range received() {
		d, _ := m["details"].(map[string]any)
		conds = append(conds, fmt.Sprint(d["period"], " ", d["percent"]))
	}
	if len(conds) != 2 || conds[0] != "daily 80" || conds[1] != "daily 100" {
		t.Errorf("the receiver got %v, want daily 80 then daily 100, once each", conds)
	}
	if emittedA := metricValue(t, a, "gatehouse_alerts_emitted_total"); emittedA < 1 {
		t.Errorf("replica A emitted %v alerts, want at least 1", emittedA)
	}
}
