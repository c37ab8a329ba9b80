package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// Money budgets end to end (issue 25, DESIGN "Budgets: reservations and
// spend"): real HTTP through gatehouse processes over one Postgres, a fake
// upstream counting what reaches it. glm-5 costs $4 per million tokens in and
// out, and every request's estimate is 1000 tokens (a 2000-byte body ÷ 4 +
// max_tokens 500): $0.004. The key's budgetUsdDaily is $0.01.

// budgetBody is a chat body of exactly 2000 bytes with max_tokens 500.
func budgetBody(model string) string {
	head := `{"model":"` + model + `","max_tokens":500,"messages":[{"role":"user","content":"`
	tail := `"}]}`
	return head + strings.Repeat("x", 2000-len(head)-len(tail)) + tail
}

// budgetPost sends body through p with the bootstrap client key.
func budgetPost(ctx context.Context, p *proc, body string) (chatReply, error) {
	return budgetPostAs(ctx, p, e2eClientKey, body)
}

// budgetPostAs sends body through p with the client key secret.
func budgetPostAs(ctx context.Context, p *proc, secret, body string) (chatReply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return chatReply{}, err
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return chatReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := chatReply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &eb)
		r.code = eb.Error.Code
	}
	return r, err
}

// keyUSD is GET /v1/gatehouse/limits' budgetsUsd through p.
type keyUSD map[string]struct {
	LimitUSD     json.Number `json:"limitUsd"`
	RemainingUSD json.Number `json:"remainingUsd"`
	ResetAt      time.Time   `json:"resetAt"`
}

func gatehouseUSD(t *testing.T, p *proc) keyUSD {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+"/v1/gatehouse/limits", nil)
	req.Header.Set("Authorization", "Bearer "+e2eClientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		BudgetsUSD keyUSD `json:"budgetsUsd"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET /v1/gatehouse/limits: %v", err)
	}
	return v.BudgetsUSD
}

// setUpBudget prices glm-5 (glm-4.7 has no price), sets the bootstrap key's
// limits through the API of procs[0] and waits until every process has them.
func setUpBudget(t *testing.T, procs []*proc, upURL, keyLimits, wantName string) {
	t.Helper()
	createConnection(t, procs[0], upURL, `{}`)
	apiDo(t, procs[0], http.MethodPatch, "/api/v1/settings", `{"prices":{"zai/glm-5":{"input":4,"output":4}}}`, &map[string]any{})
	var keys struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	apiDo(t, procs[0], http.MethodGet, "/api/v1/client-keys", "", &keys)
	if len(keys.Items) != 1 {
		t.Fatalf("client keys = %+v, want the bootstrap key", keys.Items)
	}
	apiDo(t, procs[0], http.MethodPatch, "/api/v1/client-keys/"+keys.Items[0].ID, `{"limits":`+keyLimits+`}`, &map[string]any{})
	for i, p := range procs {
		waitFor(t, 10*time.Second, fmt.Sprintf("process %d to load the key's budget", i), func() bool {
			_, ok := gatehouseUSD(t, p)[wantName]
			return ok
		})
	}
}

// untilMidnight bounds the Retry-After of a daily budget's 429 sent between
// before and after: the whole seconds to the UTC day's end.
func untilMidnight(before, after time.Time) (lo, hi int) {
	midnight := before.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return int(midnight.Sub(after).Seconds()), int(midnight.Sub(before).Seconds()) + 1
}

// parallelBudget sends n glm-5 requests at once, spread over procs, while the
// upstream holds every request it gets: at most 2 may be dispatched ($0.008
// of $0.01); the others must be 429 BUDGET_EXCEEDED with Retry-After to the
// UTC day's end, before dispatch. Then the held ones are let go (200).
func parallelBudget(t *testing.T, procs []*proc, up *upstreamtest.Server, n int) {
	t.Helper()
	hold := make(chan struct{})
	t.Cleanup(func() { closeOnce(hold) })
	if err := up.SetDefault(upstreamtest.Behavior{Hold: hold, UsageTokens: 1000}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	type reply struct {
		chatReply
		err error
	}
	replies := make(chan reply, n)
	before := time.Now()
	for i := range n {
		go func() {
			r, err := budgetPost(ctx, procs[i%len(procs)], budgetBody("glm-5"))
			replies <- reply{r, err}
		}()
	}
	for range n - 2 {
		r := <-replies
		if r.err != nil || r.status != http.StatusTooManyRequests || r.code != gateway.CodeBudgetExceeded {
			t.Fatalf("a refused request = %d %s (%v), want 429 BUDGET_EXCEEDED", r.status, r.code, r.err)
		}
		lo, hi := untilMidnight(before, time.Now())
		if ra, err := strconv.Atoi(r.retryAfter); err != nil || ra < lo || ra > hi {
			t.Errorf("Retry-After %q, want the seconds to the UTC day's end (%d to %d)", r.retryAfter, lo, hi)
		}
	}
	waitFor(t, 10*time.Second, "the two dispatched requests at the upstream", func() bool {
		return up.Requests(e2eUpstream, "glm-5") == 2
	})
	closeOnce(hold)
	for range 2 {
		if r := <-replies; r.err != nil || r.status != http.StatusOK {
			t.Fatalf("a dispatched request = %d %s (%v), want 200", r.status, r.code, r.err)
		}
	}
	if got := up.Requests(e2eUpstream, "glm-5"); got != 2 {
		t.Errorf("upstream got %d glm-5 requests, want exactly 2 (%d × $0.004 against $0.01)", got, n)
	}
}

// TestMoneyBudgetHoldsAndSurvivesRestart: 12 parallel requests of $0.004
// against a budgetUsdDaily of $0.01: 2 dispatched, 10 refused with 429
// BUDGET_EXCEEDED and Retry-After to the UTC day's end; a model without a
// price still passes; after a restart of the process the budget is still
// spent ($0.002 left, the next request refused, nothing dispatched).
func TestMoneyBudgetHoldsAndSurvivesRestart(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "glm-4.7"}, UsageTokens: 1000})
	p := serveOnURL(t, dbURL, secret)
	setUpBudget(t, []*proc{p}, up.URL(), `{"budgetUsdDaily":0.01}`, "budgetUsdDaily")
	parallelBudget(t, []*proc{p}, up, 12)
	ctx := t.Context()
	if r, err := budgetPost(ctx, p, budgetBody("glm-4.7")); err != nil || r.status != http.StatusOK {
		t.Errorf("glm-4.7 (no price: cost 0) = %d %s (%v), want 200", r.status, r.code, err)
	}

	p.interrupt(t, 30*time.Second)
	p = serveOnURL(t, dbURL, secret)
	waitFor(t, 10*time.Second, "the restarted process to load the key's budget", func() bool {
		_, ok := gatehouseUSD(t, p)["budgetUsdDaily"]
		return ok
	})
	b := gatehouseUSD(t, p)["budgetUsdDaily"]
	if b.LimitUSD != "0.01" || b.RemainingUSD != "0.002" || !b.ResetAt.Equal(time.Now().UTC().Truncate(24*time.Hour).Add(24*time.Hour)) {
		t.Errorf("after the restart: budgetUsdDaily %+v, want limit 0.01, remaining 0.002, reset at the UTC midnight", b)
	}
	if r, err := budgetPost(ctx, p, budgetBody("glm-5")); err != nil || r.status != http.StatusTooManyRequests || r.code != gateway.CodeBudgetExceeded {
		t.Errorf("after the restart: %d %s (%v), want 429 BUDGET_EXCEEDED", r.status, r.code, err)
	}
	if got := up.Requests(e2eUpstream, "glm-5"); got != 2 {
		t.Errorf("upstream got %d glm-5 requests in all, want 2", got)
	}
}

// TestMoneyBudgetAcrossReplicas: two gatehouse processes in cluster mode on
// one redis-server and one Postgres; 12 parallel requests of $0.004 spread
// over both against $0.01 a day: 2 dispatched in all, 10 refused.
func TestMoneyBudgetAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := startRedis(t)
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"glm-5", "glm-4.7"}, UsageTokens: 1000})
	procs := []*proc{
		serveClustered(t, dbURL, secret, rs.url(), "fail-open"),
		serveClustered(t, dbURL, secret, rs.url(), "fail-open"),
	}
	setUpBudget(t, procs, up.URL(), `{"budgetUsdDaily":0.01,"budgetUsdMonthly":100}`, "budgetUsdDaily")
	parallelBudget(t, procs, up, 12)
	for i, p := range procs {
		b := gatehouseUSD(t, p)
		if b["budgetUsdDaily"].RemainingUSD != "0.002" || b["budgetUsdMonthly"].RemainingUSD != "99.992" {
			t.Errorf("replica %d: budgets %+v, want 0.002 left of the day and 99.992 of the month", i, b)
		}
	}
}

// TestMoneyReservationChargedOnHangUp: a streaming client of a key with a
// money budget that hangs up before the usage event is charged its whole
// estimated cost in Postgres; completed requests their real cost — in
// process and over two replicas.
func TestMoneyReservationChargedOnHangUp(t *testing.T) {
	t.Parallel()
	resvModes(t, func(t *testing.T, rs func() *redisChild) {
		var key store.ClientKey
		var secret string
		e := newResvEnv(t, rs(), func(e *resvEnv) {
			if _, err := e.st.UpdateSettings(t.Context(), "tester", 0, func(store.Settings) (json.RawMessage, error) {
				return json.RawMessage(`{"prices":{"zai/glm-5":{"input":4,"output":4}}}`), nil
			}); err != nil {
				t.Fatal(err)
			}
			e.conn("c", "sk-up", 0, `{}`)
			key, secret = e.key("k", `{"budgetUsdDaily": 1}`)
		})
		last := make(chan struct{})
		t.Cleanup(func() { closeOnce(last) })
		if err := e.up.SetDefault(upstreamtest.Behavior{Chunks: 4, HoldLast: last, UsageTokens: 37}); err != nil {
			t.Fatal(err)
		}
		body := resvBody(true, 150)
		cost := 4 * resvEstimate(body, 150) // $4 per million tokens in and out
		spent := func() int64 {
			t.Helper()
			sp, err := e.st.ClientKeyBudgetSpend(t.Context(), key.ID, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return sp.Day
		}
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[0]+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("stream = %d, first line %q (%v); want 200 and a data line", resp.StatusCode, line, err)
		}
		cancel() // the client hangs up before the last chunk and the usage event
		_ = resp.Body.Close()
		e.settled()
		if got := spent(); got != cost {
			t.Errorf("after a hang-up: the key's day holds %d micro-dollars, want the estimate's cost %d", got, cost)
		}
		closeOnce(last)
		for _, stream := range []bool{true, false} {
			if r := e.post(t.Context(), 1, secret, resvBody(stream, 150)); r.err != nil || r.status != http.StatusOK {
				t.Fatalf("stream %v: %d %s (%v), want 200", stream, r.status, r.code, r.err)
			}
		}
		e.settled()
		if got, want := spent(), cost+2*37*4; got != want {
			t.Errorf("after two completed requests of 37 tokens: %d micro-dollars, want %d", got, want)
		}
	})
}
