package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

type loggedRequest struct {
	ID             string  `json:"id"`
	KeyID          *string `json:"keyId"`
	ConnectionName *string `json:"connectionName"`
	Model          *string `json:"model"`
	UpstreamModel  *string `json:"upstreamModel"`
	Status         int     `json:"status"`
	Code           *string `json:"code"`
	Gate           *string `json:"gate"`
	Attempts       int     `json:"attempts"`
	InputTokens    int64   `json:"inputTokens"`
	OutputTokens   int64   `json:"outputTokens"`
	CostMicros     int64   `json:"costMicros"`
	TTFTMs         *int    `json:"ttftMs"`
	Replica        *string `json:"replica"`
}

func str(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// TestRequestLogEndToEnd drives real HTTP through a gatehouse process with a price of
// $2/$8 per million for glm-5 and an upstream reporting 1000 input and 500 output
// tokens: served requests are logged with cost_micros 6000 and sum into
// /api/v1/usage by key, connection and model; rejected ones (MODEL_NOT_ALLOWED, the
// key's cap, the execution bound, a bad key) are logged with status, code and gate;
// and after shutdown the rows written plus the rows dropped are the requests answered.
func TestRequestLogEndToEnd(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "glm-4.7", "slow-model"}, UsageTokens: 1500})
	p := serveOnURL(t, dbURL, store.GenerateSecretKey())
	ctx := t.Context()

	createConnection(t, p, up.URL(), `{}`)
	const slowUpstreamKey = "upstream-secret-key-slow-7a1b"
	apiDo(t, p, http.MethodPost, "/api/v1/connections", fmt.Sprintf(`{"name":"slow","provider":"slowco","apiStyle":"openai",
		"baseUrl":%q,"apiKey":%q,"models":["slow-model"],"rateLimitOverrides":{"executionMaxWaitMs":300}}`,
		up.URL()+"/v1", slowUpstreamKey), &apiConnection{})
	if err := up.SetKeyBehavior(slowUpstreamKey, upstreamtest.Behavior{Latency: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	apiDo(t, p, http.MethodPatch, "/api/v1/settings", `{"prices":{"zai/glm-5":{"input":2,"output":8}}}`, &map[string]any{})
	var keys struct {
		Items []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"items"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/client-keys", "", &keys)
	if len(keys.Items) != 1 {
		t.Fatalf("client keys = %+v, want the bootstrap key", keys.Items)
	}
	keyID := keys.Items[0].ID
	apiDo(t, p, http.MethodPatch, "/api/v1/client-keys/"+keyID,
		`{"limits":{"models":["glm-5","slow-model"],"maxConcurrent":1,"maxWaitMs":200}}`, &map[string]any{})
	waitFor(t, 10*time.Second, "the key's cap to load", func() bool { return gateCap(t, p, "key:"+keyID) == 1 })

	answered := 0
	send := func(model, key string) int {
		t.Helper()
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", model, err)
		}
		_ = resp.Body.Close()
		answered++
		return resp.StatusCode
	}
	for range 3 {
		if st := send("glm-5", e2eClientKey); st != http.StatusOK {
			t.Fatalf("glm-5: status %d, want 200", st)
		}
	}
	if st := send("glm-4.7", e2eClientKey); st != http.StatusForbidden {
		t.Fatalf("glm-4.7 (not in the key's models): status %d, want 403", st)
	}
	if st := send("slow-model", e2eClientKey); st != http.StatusGatewayTimeout {
		t.Fatalf("slow-model past its execution bound: status %d, want 504", st)
	}
	if st := send("glm-5", "not-a-key-0123456789abcdef"); st != http.StatusUnauthorized {
		t.Fatalf("unknown key: status %d, want 401", st)
	}
	// The key's cap of 1: one request held upstream, the next waits 200 ms and is refused.
	hold := make(chan struct{})
	if err := up.SetKeyBehavior(e2eUpstream, upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	heldStatus := 0
	held.Go(func() { heldStatus = send("glm-5", e2eClientKey) })
	waitFor(t, 10*time.Second, "a request held upstream", func() bool { return up.InFlight() == 1 })
	capStatus := send("glm-5", e2eClientKey)
	close(hold)
	held.Wait()
	if capStatus != http.StatusTooManyRequests || heldStatus != http.StatusOK {
		t.Fatalf("at the key's cap: statuses %d (held) and %d, want 200 and 429", heldStatus, capStatus)
	}

	var all []loggedRequest
	waitFor(t, 15*time.Second, "every request in the log", func() bool {
		var page struct {
			Items []loggedRequest `json:"items"`
		}
		apiDo(t, p, http.MethodGet, "/api/v1/requests?limit=100", "", &page)
		all = page.Items
		return len(all) == answered
	})
	byKind := map[string][]loggedRequest{}
	for _, r := range all {
		kind := fmt.Sprintf("%d %s", r.Status, str(r.Code))
		byKind[kind] = append(byKind[kind], r)
	}
	served := byKind["200 <null>"]
	if len(served) != 4 {
		t.Fatalf("served rows = %d, want 4; rows by status and code: %v", len(served), keysOf(byKind))
	}
	for _, r := range served {
		if r.CostMicros != 6000 || r.InputTokens != 1000 || r.OutputTokens != 500 || str(r.ConnectionName) != "zai-main" ||
			str(r.UpstreamModel) != "glm-5" || r.Attempts != 1 || r.TTFTMs == nil || str(r.KeyID) != keyID || r.Replica == nil {
			t.Errorf("served row %+v: want cost 6000, 1000/500 tokens, zai-main/glm-5, 1 attempt, a ttft, the key and a replica", r)
		}
	}
	for kind, want := range map[string]struct{ gate, conn string }{
		"403 MODEL_NOT_ALLOWED":            {"<null>", "<null>"},
		"429 SEMAPHORE_TIMEOUT":            {"key:" + keyID, "<null>"},
		"504 RATE_LIMIT_EXECUTION_TIMEOUT": {"<null>", "slow"},
		"401 INVALID_API_KEY":              {"<null>", "<null>"},
	} {
		rows := byKind[kind]
		if len(rows) != 1 {
			t.Errorf("%s: %d rows, want 1 (rows: %v)", kind, len(rows), keysOf(byKind))
			continue
		}
		if r := rows[0]; str(r.Gate) != want.gate || str(r.ConnectionName) != want.conn || r.CostMicros != 0 {
			t.Errorf("%s: gate %s, connection %s, cost %d; want gate %s, connection %s, cost 0",
				kind, str(r.Gate), str(r.ConnectionName), r.CostMicros, want.gate, want.conn)
		}
	}
	var one loggedRequest
	apiDo(t, p, http.MethodGet, "/api/v1/requests/"+served[0].ID, "", &one)
	if one.ID != served[0].ID || one.CostMicros != 6000 {
		t.Errorf("GET /api/v1/requests/{id} = %+v, want the served row with cost 6000", one)
	}

	for _, tc := range []struct{ groupBy, group string }{{"key", "bootstrap"}, {"connection", "zai-main"}, {"model", "glm-5"}} {
		var u struct {
			Rows []struct {
				Group    string  `json:"group"`
				Requests int64   `json:"requests"`
				CostUSD  float64 `json:"costUsd"`
			} `json:"rows"`
		}
		apiDo(t, p, http.MethodGet, "/api/v1/usage?bucket=day&groupBy="+tc.groupBy, "", &u)
		var cost float64
		for _, r := range u.Rows {
			if r.Group == tc.group {
				cost += r.CostUSD
			}
		}
		if math.Round(cost*1e6) != 24000 {
			t.Errorf("usage by %s: %s cost $%v, want $0.024 (4 × 6000 micro-dollars); rows %+v", tc.groupBy, tc.group, cost, u.Rows)
		}
	}
	var key struct {
		Spend struct {
			TodayUSD float64 `json:"todayUsd"`
		} `json:"spend"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/client-keys/"+keyID, "", &key)
	if math.Round(key.Spend.TodayUSD*1e6) != 24000 {
		t.Errorf("client key spend today = $%v, want $0.024", key.Spend.TodayUSD)
	}

	// After shutdown: every request answered was written or dropped, exactly.
	p.interrupt(t, 30*time.Second)
	var stats struct{ Added, Written, Dropped int64 }
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "request log stopped" {
			stats.Added, stats.Written, stats.Dropped = int64(line["added"].(float64)), int64(line["written"].(float64)), int64(line["dropped"].(float64))
		}
	}
	conn2, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(context.WithoutCancel(ctx))
	var rows int64
	if err := conn2.QueryRow(ctx, `SELECT count(*) FROM requests`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if stats.Added != int64(answered) || rows != stats.Written || rows+stats.Dropped != int64(answered) {
		t.Errorf("requests answered %d; log added %d, written %d, dropped %d; rows in the table %d: want rows + dropped = answered",
			answered, stats.Added, stats.Written, stats.Dropped, rows)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
