package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// Prompt caching end to end (DESIGN "Prompt caching: counted and priced"):
// real HTTP through a gatehouse process over a real Postgres, a fake upstream
// answering with cache counts in each style's own fields. Prices: $3 in, $15
// out, $0.30 a cache read, $3.75 a cache write, per million tokens.

const (
	cacheAnthKey = "upstream-secret-key-anthropic-1a2b"
	cacheOAIKey  = "upstream-secret-key-openai-3c4d"
	cachePrices  = `{"input":3,"output":15,"cachedInput":0.3,"cacheWrite":3.75}`
)

var (
	// claudeTurn is an Anthropic answer: 4 uncached input tokens, 20 000 read
	// from the cache, 1 000 written to it, 100 out — 11 262 micro-dollars.
	claudeTurn = upstreamtest.CacheUsage{Input: 4, CacheRead: 20000, CacheWrite: 1000, Output: 100}
	// codexTurn is an OpenAI answer: 21 000 prompt tokens, 20 000 of them
	// cached, 100 out — 10 500 micro-dollars.
	codexTurn = upstreamtest.CacheUsage{Input: 1000, CacheRead: 20000, Output: 100}
)

// cacheSetUp makes an Anthropic connection "anth" (claude-x) and an OpenAI
// one "oai" (gpt-x) to up with the given overrides, prices both models, and
// programs up to answer them with claudeTurn and codexTurn. It returns the
// bootstrap client key's id.
func cacheSetUp(t *testing.T, p *proc, up *upstreamtest.Server, anthOverrides, oaiOverrides string) string {
	t.Helper()
	// Prices first: the reload that brings the connections in reads them too.
	apiDo(t, p, http.MethodPatch, "/api/v1/settings", `{"prices":{"claude-x":`+cachePrices+`,"gpt-x":`+cachePrices+`}}`, &map[string]any{})
	for _, c := range []struct{ name, provider, style, key, model, overrides string }{
		{"anth", "anthropic", "anthropic", cacheAnthKey, "claude-x", anthOverrides},
		{"oai", "openai", "openai", cacheOAIKey, "gpt-x", oaiOverrides},
	} {
		var conn apiConnection
		apiDo(t, p, http.MethodPost, "/api/v1/connections", fmt.Sprintf(`{"name":%q,"provider":%q,"apiStyle":%q,
			"baseUrl":%q,"apiKey":%q,"models":[%q],"rateLimitOverrides":%s}`,
			c.name, c.provider, c.style, up.URL()+"/v1", c.key, c.model, c.overrides), &conn)
		waitFor(t, 10*time.Second, "the gateway to load connection "+c.name, func() bool { return gateCap(t, p, "connection:"+conn.ID) >= 0 })
	}
	setCacheTurn(t, up, cacheAnthKey, claudeTurn)
	setCacheTurn(t, up, cacheOAIKey, codexTurn)
	var keys struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/client-keys", "", &keys)
	if len(keys.Items) != 1 {
		t.Fatalf("client keys = %+v, want the bootstrap key", keys.Items)
	}
	return keys.Items[0].ID
}

func setCacheTurn(t *testing.T, up *upstreamtest.Server, upstreamKey string, u upstreamtest.CacheUsage) {
	t.Helper()
	if err := up.SetKeyBehavior(upstreamKey, upstreamtest.Behavior{Cache: &u}); err != nil {
		t.Fatal(err)
	}
}

// cacheCall is one client request of the tests: route and body.
type cacheCall struct {
	name, path, body string
}

func claudeCall(stream bool) cacheCall {
	return cacheCall{fmt.Sprintf("messages stream=%v", stream), "/v1/messages",
		fmt.Sprintf(`{"model":"claude-x","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)}
}

func codexCall(route string, stream bool) cacheCall {
	if route == "responses" {
		return cacheCall{fmt.Sprintf("responses stream=%v", stream), "/v1/responses",
			fmt.Sprintf(`{"model":"gpt-x","max_output_tokens":100,"stream":%v,"input":"hi"}`, stream)}
	}
	return cacheCall{fmt.Sprintf("chat stream=%v", stream), "/v1/chat/completions",
		fmt.Sprintf(`{"model":"gpt-x","max_tokens":100,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)}
}

// send makes c through p with the bootstrap client key, reads the whole
// answer and returns its status and body.
func (c cacheCall) send(ctx context.Context, p *proc) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+c.path, bytes.NewBufferString(c.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+e2eClientKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (c cacheCall) mustSend(t *testing.T, p *proc) {
	t.Helper()
	if st, body, err := c.send(t.Context(), p); err != nil || st != http.StatusOK {
		t.Fatalf("%s: %d %s (%v), want 200", c.name, st, body, err)
	}
}

// micros is a dollar amount of the API (a JSON number) in micro-dollars.
func micros(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// TestPromptCacheCostEndToEnd: an Anthropic turn with cache reads and writes
// costs exactly 11 262 micro-dollars and an OpenAI one with cached prompt
// tokens 10 500, streamed and not (chat and Responses); each request log row,
// each /api/v1/usage row and the key's spend agree to the micro-dollar.
func TestPromptCacheCostEndToEnd(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	up := startUpstream(t, upstreamtest.Options{Models: []string{"claude-x", "gpt-x"}})
	p := serveOnURL(t, dbURL, store.GenerateSecretKey())
	keyID := cacheSetUp(t, p, up, `{}`, `{}`)

	type logged struct {
		Route            string `json:"route"`
		Stream           bool   `json:"stream"`
		Status           int    `json:"status"`
		InputTokens      int64  `json:"inputTokens"`
		OutputTokens     int64  `json:"outputTokens"`
		CachedTokens     int64  `json:"cachedTokens"`
		CacheWriteTokens int64  `json:"cacheWriteTokens"`
		CostMicros       int64  `json:"costMicros"`
	}
	claude := logged{InputTokens: 21004, OutputTokens: 100, CachedTokens: 20000, CacheWriteTokens: 1000, CostMicros: 11262, Status: 200}
	codex := logged{InputTokens: 21000, OutputTokens: 100, CachedTokens: 20000, CostMicros: 10500, Status: 200}
	var want []logged
	for _, stream := range []bool{false, true} {
		claudeCall(stream).mustSend(t, p)
		codexCall("chat", stream).mustSend(t, p)
		codexCall("responses", stream).mustSend(t, p)
		for _, w := range []struct {
			row   logged
			route string
		}{{claude, "messages"}, {codex, "chat"}, {codex, "responses"}} {
			w.row.Route, w.row.Stream = w.route, stream
			want = append(want, w.row)
		}
	}

	var rows struct {
		Items []logged `json:"items"`
	}
	waitFor(t, 15*time.Second, "six rows in the request log", func() bool {
		apiDo(t, p, http.MethodGet, "/api/v1/requests?limit=50", "", &rows)
		return len(rows.Items) == len(want)
	})
	got := map[string]logged{}
	for _, r := range rows.Items {
		got[fmt.Sprintf("%s stream=%v", r.Route, r.Stream)] = r
	}
	for _, w := range want {
		k := fmt.Sprintf("%s stream=%v", w.Route, w.Stream)
		if got[k] != w {
			t.Errorf("request log row %s = %+v, want %+v", k, got[k], w)
		}
	}

	type usageRow struct {
		Group            string  `json:"group"`
		InputTokens      int64   `json:"inputTokens"`
		OutputTokens     int64   `json:"outputTokens"`
		CachedTokens     int64   `json:"cachedTokens"`
		CacheWriteTokens int64   `json:"cacheWriteTokens"`
		CacheHitRatio    float64 `json:"cacheHitRatio"`
		CostUSD          float64 `json:"costUsd"`
	}
	var usage struct {
		Rows []usageRow `json:"rows"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/usage?groupBy=model&bucket=day", "", &usage)
	sums := map[string]usageRow{}
	for _, r := range usage.Rows {
		s := sums[r.Group]
		s.Group = r.Group
		s.InputTokens += r.InputTokens
		s.OutputTokens += r.OutputTokens
		s.CachedTokens += r.CachedTokens
		s.CacheWriteTokens += r.CacheWriteTokens
		s.CostUSD += r.CostUSD
		s.CacheHitRatio = r.CacheHitRatio // one day bucket: the row's own
		sums[r.Group] = s
	}
	for model, w := range map[string]struct {
		in, cached, write, cost int64
	}{"claude-x": {2 * 21004, 40000, 2000, 2 * 11262}, "gpt-x": {4 * 21000, 80000, 0, 4 * 10500}} {
		s := sums[model]
		if s.InputTokens != w.in || s.CachedTokens != w.cached || s.CacheWriteTokens != w.write || micros(s.CostUSD) != w.cost {
			t.Errorf("usage of %s = %+v, want input %d, cached %d, written %d, cost %d micro-dollars", model, s, w.in, w.cached, w.write, w.cost)
		}
		if want := float64(w.cached) / float64(w.in); math.Abs(s.CacheHitRatio-want) > 1e-12 {
			t.Errorf("cacheHitRatio of %s = %v, want %v", model, s.CacheHitRatio, want)
		}
	}

	const spent = 2*11262 + 4*10500
	var key struct {
		Spend struct {
			TodayUSD float64 `json:"todayUsd"`
		} `json:"spend"`
	}
	waitFor(t, 15*time.Second, "the key's spend", func() bool {
		apiDo(t, p, http.MethodGet, "/api/v1/client-keys/"+keyID, "", &key)
		return micros(key.Spend.TodayUSD) >= spent
	})
	if got := micros(key.Spend.TodayUSD); got != spent {
		t.Errorf("the key's spend today = %d micro-dollars, want %d", got, spent)
	}
}

// keyTPDRemaining is what is left of the bootstrap key's tpd.
func keyTPDRemaining(t *testing.T, p *proc) int64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+p.addr+"/v1/gatehouse/limits", nil)
	req.Header.Set("Authorization", "Bearer "+e2eClientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Budgets map[string]struct {
			Remaining int64 `json:"remaining"`
		} `json:"budgets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET /v1/gatehouse/limits: %v", err)
	}
	return v.Budgets["tpd"].Remaining
}

// connTPDRemaining is what is left of connection name's tpd.
func connTPDRemaining(t *testing.T, p *proc, name string) int64 {
	t.Helper()
	var g struct {
		Connections []struct {
			Name    string `json:"name"`
			Budgets map[string]struct {
				Remaining int64 `json:"remaining"`
			} `json:"budgets"`
		} `json:"connections"`
	}
	apiDo(t, p, http.MethodGet, "/api/v1/gates", "", &g)
	for _, c := range g.Connections {
		if c.Name == name {
			return c.Budgets["tpd"].Remaining
		}
	}
	t.Fatalf("no connection %s in /api/v1/gates", name)
	return 0
}

// TestPromptCacheTokenBudgetsPerStyle: token budgets count what each
// provider's own limits count. Anthropic: input − cache reads + output, so a
// key and a connection with tpd 5000 take the turn of 21 104 tokens counted
// as 4 + 1000 + 100 = 1104, and then more; OpenAI: the whole prompt + output,
// so a turn of 21 000 prompt tokens counts 21 100.
func TestPromptCacheTokenBudgetsPerStyle(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	up := startUpstream(t, upstreamtest.Options{Models: []string{"claude-x", "gpt-x"}})
	p := serveOnURL(t, dbURL, store.GenerateSecretKey())
	keyID := cacheSetUp(t, p, up, `{"tpd":5000}`, `{"tpd":100000}`)
	apiDo(t, p, http.MethodPatch, "/api/v1/client-keys/"+keyID, `{"limits":{"tpd":5000}}`, &map[string]any{})
	waitFor(t, 10*time.Second, "the key's tpd to load", func() bool { return keyTPDRemaining(t, p) == 5000 })

	for i := range 4 {
		claudeCall(i%2 == 1).mustSend(t, p)
		left := int64(5000 - (i+1)*1104)
		waitFor(t, 10*time.Second, fmt.Sprintf("anthropic rule: key tpd left %d after %d turns", left, i+1), func() bool {
			return keyTPDRemaining(t, p) == left
		})
		if got := connTPDRemaining(t, p, "anth"); got != left {
			t.Fatalf("anthropic rule: connection tpd left %d after %d turns, want %d", got, i+1, left)
		}
	}

	codexCall("chat", false).mustSend(t, p)
	waitFor(t, 10*time.Second, "openai rule: connection tpd left 100000 − 21100", func() bool {
		return connTPDRemaining(t, p, "oai") == 100000-21100
	})
	if got := keyTPDRemaining(t, p); got != 0 {
		t.Errorf("openai rule: key tpd left %d after 21 100 more tokens, want 0", got)
	}
	st, body, err := codexCall("chat", false).send(t.Context(), p)
	if err != nil || st != http.StatusTooManyRequests || !strings.Contains(body, "RATE_LIMIT_TPD") {
		t.Errorf("after the OpenAI turn: %d %s (%v), want 429 RATE_LIMIT_TPD", st, body, err)
	}
}

// TestClaudeCodeSessionCacheHitRatio: a Claude Code-like session — the
// first turn writes the cache, every later turn reads what the turns before
// wrote and writes a little more — shows on /usage and on the overview the
// cache-hit ratio of the upstream's own counts (reads ÷ every input token),
// per connection, key and model, and /api/v1/usage says the same.
func TestClaudeCodeSessionCacheHitRatio(t *testing.T) {
	t.Parallel()
	dbURL := storetest.URL(t)
	secret := store.GenerateSecretKey()
	up := startUpstream(t, upstreamtest.Options{Models: []string{"claude-x", "gpt-x"}})
	p := serveOnURL(t, dbURL, secret)
	cacheSetUp(t, p, up, `{}`, `{}`)
	s := openTestStore(t, dbURL, secret)
	if _, err := s.CreateUser(t.Context(), store.ActorSystem, "viewer@example.com", "a-long-viewer-password", store.RoleViewer); err != nil {
		t.Fatal(err)
	}

	var in, read int64
	cached := int64(0)
	for turn := range 6 {
		u := upstreamtest.CacheUsage{Input: 3, CacheRead: int(cached), CacheWrite: 1200, Output: 150}
		if turn == 0 {
			u = upstreamtest.CacheUsage{Input: 5, CacheWrite: 18000, Output: 300}
		}
		setCacheTurn(t, up, cacheAnthKey, u)
		claudeCall(turn%2 == 0).mustSend(t, p)
		in += int64(u.Input + u.CacheRead + u.CacheWrite)
		read += int64(u.CacheRead)
		cached += int64(u.CacheWrite)
	}
	ratio := float64(read) / float64(in)
	wantText := fmt.Sprintf("%d %%", int64(ratio*100+0.5))

	var usage struct {
		Rows []struct {
			Group         string  `json:"group"`
			InputTokens   int64   `json:"inputTokens"`
			CachedTokens  int64   `json:"cachedTokens"`
			CacheHitRatio float64 `json:"cacheHitRatio"`
		} `json:"rows"`
	}
	waitFor(t, 15*time.Second, "the session's six turns in /api/v1/usage", func() bool {
		apiDo(t, p, http.MethodGet, "/api/v1/usage?groupBy=connection&bucket=day", "", &usage)
		return len(usage.Rows) == 1 && usage.Rows[0].InputTokens == in
	})
	if r := usage.Rows[0]; r.Group != "anth" || r.CachedTokens != read || math.Abs(r.CacheHitRatio-ratio) > 1e-12 {
		t.Errorf("usage row %+v, want anth with %d of %d input tokens read (ratio %v)", r, read, in, ratio)
	}

	dash := dashboardSignIn(t, p, "viewer@example.com", "a-long-viewer-password")
	for _, path := range []string{"/usage", "/"} {
		resp, err := dash.Get("http://" + p.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := goquery.NewDocumentFromReader(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d (%v)", path, resp.StatusCode, err)
		}
		for _, row := range []string{`[data-group="connection"][data-name="anth"]`, `[data-group="key"]`, `[data-group="model"][data-name="claude-x"]`} {
			cell := doc.Find(`[data-testid="cache-row"]` + row + ` [data-testid="cache-hit"]`)
			if got := strings.TrimSpace(cell.Text()); cell.Length() != 1 || got != wantText {
				t.Errorf("%s: cache hit of %s = %q, want %q (%d of %d input tokens read)", path, row, got, wantText, read, in)
			}
		}
	}
}
