package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/internal/promrulestest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// TestPrometheusRulesOnServe: a gatehouse process in cluster mode gets a
// request-log row the database refuses (dropped) and then loses Redis; its
// /metrics, scraped over HTTP, makes docs/prometheus-alerts.yaml's
// request-log and Redis rules fire under `promtool test rules`, and no
// other rule: the gateway package's TestPrometheusAlertRules drives those.
func TestPrometheusRulesOnServe(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	dbURL := storetest.URL(t)
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "poison"}})
	p := serveClustered(t, dbURL, store.GenerateSecretKey(), rs.url(), "fail-open")
	apiDo(t, p, http.MethodPost, "/api/v1/connections", fmt.Sprintf(`{"name":"zai-main","provider":"zai","apiStyle":"openai",
		"baseUrl":%q,"apiKey":%q,"models":["glm-5","poison"]}`, up.URL()+"/v1", e2eUpstream), &apiConnection{})
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	// A row Postgres refuses is dropped alone by the request log's writer.
	if _, err := conn.Exec(ctx, `ALTER TABLE requests ADD CONSTRAINT requests_test_poison CHECK (model IS DISTINCT FROM 'poison')`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the connection to load", func() bool {
		st, err := chat(ctx, p, "glm-5")
		return err == nil && st == http.StatusOK
	})
	if st, err := chat(ctx, p, "poison"); err != nil || st != http.StatusOK {
		t.Fatalf("poison request = %d (%v), want 200", st, err)
	}
	waitFor(t, 30*time.Second, "the refused row dropped", func() bool {
		return metricValue(t, p, "gatehouse_request_log_dropped_total") == 1
	})
	if v := metricValue(t, p, "gatehouse_cluster_degraded"); v != 0 {
		t.Fatalf("gatehouse_cluster_degraded = %v with Redis up, want 0", v)
	}
	rs.stop(t)
	waitFor(t, 30*time.Second, "the replica to see Redis away", func() bool {
		return metricValue(t, p, "gatehouse_cluster_degraded") == 1
	})

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	fams, err := promrulestest.ParseScrape(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	const there = "gateway TestPrometheusAlertRules"
	elsewhere := map[string]string{}
	for _, r := range promrulestest.Rules(t, "../../docs/prometheus-alerts.yaml") {
		elsewhere[r.Alert] = there
	}
	delete(elsewhere, "GatehouseRequestLogDropped")
	delete(elsewhere, "GatehouseClusterDegraded")
	promrulestest.Evaluate(t, "../../docs/prometheus-alerts.yaml", fams, map[string][]map[string]string{
		"GatehouseRequestLogDropped": {{}},
		"GatehouseClusterDegraded":   {{}},
	}, elsewhere)
}
