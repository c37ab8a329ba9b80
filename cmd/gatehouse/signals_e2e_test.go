package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
	"github.com/google/go-cmp/cmp"
)

// gatehouseLimits is GET /v1/gatehouse/limits as the client key sees it.
func gatehouseLimits(t *testing.T, p *proc) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+"/v1/gatehouse/limits", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e2eClientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("GET /v1/gatehouse/limits: %v: %s", err, b)
		}
	}
	return resp.StatusCode, out
}

// TestGatehouseLimitsMatchesClientKeyAPI: through a real gatehouse serve on
// Postgres, a client key's GET /v1/gatehouse/limits shows the key's id, name
// and limits exactly as GET /api/v1/client-keys/{id} does after an edit over
// the API, its class, and a budget for each of its rate limits with the
// configured limit; a request's tokens are taken off the tpd.
func TestGatehouseLimitsMatchesClientKeyAPI(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5"}})
	p := serveOnURL(t, dbURL, store.GenerateSecretKey())
	createConnection(t, p, up.URL(), `{}`)
	var keys struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/client-keys", "", &keys)
	if len(keys.Items) != 1 {
		t.Fatalf("client keys = %+v, want the bootstrap key", keys.Items)
	}
	id := keys.Items[0].ID
	apiDo(t, p, http.MethodPatch, "/api/v1/client-keys/"+id,
		`{"limits":{"models":["glm-5","zai/*"],"maxConcurrent":3,"maxWaitMs":5000,"rpm":1000,"tpm":50000,"tpd":2000000,"weight":2,"priority":"batch"}}`,
		&map[string]any{})
	var api map[string]any
	apiDo(t, p, http.MethodGet, "/api/v1/client-keys/"+id, "", &api)

	var got map[string]any
	waitFor(t, 10*time.Second, "the edited limits in the gateway", func() bool {
		status, l := gatehouseLimits(t, p)
		got = l
		return status == http.StatusOK && l["priority"] == "batch"
	})
	for _, field := range []string{"id", "name", "limits"} {
		if diff := cmp.Diff(api[field], got[field]); diff != "" {
			t.Errorf("/v1/gatehouse/limits %s differs from /api/v1/client-keys/{id} (-api +limits):\n%s", field, diff)
		}
	}
	budgets, _ := got["budgets"].(map[string]any)
	for name, limit := range map[string]float64{"rpm": 1000, "tpm": 50000, "tpd": 2000000} {
		b, _ := budgets[name].(map[string]any)
		if b == nil || b["limit"] != limit {
			t.Errorf("budget %s = %v, want limit %v (budgets %v)", name, b, limit, budgets)
		}
	}
	if st, err := chat(t.Context(), p, "glm-5"); err != nil || st != http.StatusOK {
		t.Fatalf("chat: %d %v", st, err)
	}
	waitFor(t, 10*time.Second, "the request's tokens taken off the tpd", func() bool {
		_, l := gatehouseLimits(t, p)
		b, _ := l["budgets"].(map[string]any)
		tpd, _ := b["tpd"].(map[string]any)
		left, _ := tpd["remaining"].(float64)
		return left > 0 && left < 2000000
	})
}
