package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// logCachedRequests prices claude-x and gpt-x at $3 in, $15 out, $0.30 a
// cache read and $3.75 a cache write per million, and logs two served
// requests of team-a: an Anthropic turn of 4 uncached, 20 000 read, 1 000
// written and 100 out tokens (11 262 micro-dollars) and an OpenAI one of
// 21 000 prompt tokens, 20 000 of them cached, 100 out (10 500).
func (d *dash) logCachedRequests(t *testing.T) []store.RequestRow {
	t.Helper()
	if _, err := d.store.UpdateSettings(t.Context(), store.ActorSystem, 0, func(store.Settings) (json.RawMessage, error) {
		return json.RawMessage(`{"prices":{"claude-x":{"input":3,"output":15,"cachedInput":0.3,"cacheWrite":3.75},
			"gpt-x":{"input":3,"output":15,"cachedInput":0.3,"cacheWrite":3.75}}}`), nil
	}); err != nil {
		t.Fatalf("UpdateSettings: %v", err)
	}
	a := d.createKey(t, "team-a", `{}`)
	anth, oai := "6f1c0000-0000-4000-8000-0000000000a1", "6f1c0000-0000-4000-8000-0000000000b2"
	now := time.Now().UTC()
	rows := []store.RequestRow{
		{StartedAt: now.Add(-2 * time.Minute), KeyID: a.ID, KeyName: "team-a", ConnectionID: anth, ConnectionName: "anth",
			Provider: "anthropic", Model: "claude-x", UpstreamModel: "claude-x", Route: "messages", Status: 200, Attempts: 1,
			TTFTMs: 12, InputTokens: 21004, OutputTokens: 100, CachedTokens: 20000, CacheWriteTokens: 1000, CostMicros: 11262},
		{StartedAt: now.Add(-time.Minute), KeyID: a.ID, KeyName: "team-a", ConnectionID: oai, ConnectionName: "oai",
			Provider: "openai", Model: "gpt-x", UpstreamModel: "gpt-x", Route: "chat", Status: 200, Attempts: 1,
			TTFTMs: 9, InputTokens: 21000, OutputTokens: 100, CachedTokens: 20000, CostMicros: 10500},
	}
	if err := d.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	return rows
}

// TestCachePages: /requests/{id} shows a request's cache reads and writes,
// its hit ratio and its cost split; the overview and /usage show the
// prompt-cache table per key, connection and model, /usage its CSV, and
// /keys each key's cache hit; the requests CSV carries the cache columns.
func TestCachePages(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	rows := d.logCachedRequests(t)
	c := d.signIn(t, "viewer@example.com")

	one := d.get(t, c, "/requests/"+rows[0].ID).want(t, http.StatusOK)
	for id, want := range map[string]string{"request-cache-read": "20,000", "request-cache-write": "1000", "request-cache-hit": "95 %",
		"cost-split-total": "$0.011262"} {
		if got := strings.TrimSpace(one.testid(id).Text()); got != want {
			t.Errorf("%s = %q, want %q", id, got, want)
		}
	}
	split := map[string][2]string{}
	for _, kind := range []string{"input", "cache-read", "cache-write", "output"} {
		row := one.testid("cost-split-" + kind)
		split[kind] = [2]string{strings.TrimSpace(row.Find(tid("tokens")).Text()), strings.TrimSpace(row.Find(tid("cost")).Text())}
	}
	wantSplit := map[string][2]string{"input": {"4", "$0.000012"}, "cache-read": {"20,000", "$0.006"},
		"cache-write": {"1000", "$0.00375"}, "output": {"100", "$0.0015"}}
	if diff := cmp.Diff(wantSplit, split); diff != "" {
		t.Errorf("cost split (-want +got):\n%s", diff)
	}
	if one.testid("cost-split-differs").Length() != 0 {
		t.Error("the split at today's prices is said to differ from the logged cost")
	}

	wantCache := map[string]string{"key team-a": "21,004 20,000 1000 95 %",
		"connection anth": "21,004 20,000 1000 95 %", "connection oai": "21,000 20,000 0 95 %",
		"model claude-x": "21,004 20,000 1000 95 %", "model gpt-x": "21,000 20,000 0 95 %"}
	cacheTable := func(p page) map[string]string {
		got := map[string]string{}
		p.testid("cache-row").Each(func(_ int, s *goquery.Selection) {
			g, _ := s.Attr("data-group")
			n, _ := s.Attr("data-name")
			var cells []string
			for _, id := range []string{"cache-input", "cache-read", "cache-write", "cache-hit"} {
				cells = append(cells, strings.TrimSpace(s.Find(tid(id)).Text()))
			}
			got[g+" "+n] = strings.Join(cells, " ")
		})
		return got
	}
	wantCache["key team-a"] = "42,004 40,000 1000 95 %"
	for _, path := range []string{"/", "/usage"} {
		if diff := cmp.Diff(wantCache, cacheTable(d.get(t, c, path).want(t, http.StatusOK))); diff != "" {
			t.Errorf("%s cache table (-want +got):\n%s", path, diff)
		}
	}
	csv := d.get(t, c, "/usage.csv?range=24h&chart=cache").want(t, http.StatusOK).body
	if !strings.HasPrefix(csv, "group,name,input_tokens,cached_tokens,cache_write_tokens,cache_hit_ratio\nkey,team-a,42004,40000,1000,0.9523\n") {
		t.Errorf("cache CSV:\n%s", csv)
	}
	if got := strings.TrimSpace(d.get(t, c, "/keys").want(t, http.StatusOK).testid("key-cache-hit").Text()); got != "95 %" {
		t.Errorf("/keys cache hit = %q, want 95 %%", got)
	}
	reqCSV := d.get(t, c, "/requests.csv").want(t, http.StatusOK).body
	lines := strings.Split(strings.TrimSpace(reqCSV), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], ",input_tokens,output_tokens,cached_tokens,cache_write_tokens,cost_usd,") ||
		!strings.Contains(lines[2], ",21004,100,20000,1000,0.011262,") {
		t.Errorf("requests CSV:\n%s", reqCSV)
	}
}

// TestCacheRequestInBrowser: a real Chromium opens /requests/{id} of an
// Anthropic turn and finds its cache reads, writes and cost split.
func TestCacheRequestInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	rows := d.logCachedRequests(t)
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "viewer@example.com")
	run(t, tab, "open the request", chromedp.Navigate(d.srv.URL+"/requests/"+rows[0].ID),
		chromedp.WaitVisible(chromedp.CSS(tid("cost-split"))))
	got := value(t, tab, "reads, writes and split", chromedp.Evaluate[map[string]string](`(() => {
		const t = id => document.querySelector('[data-testid="' + id + '"]').textContent.replace(/\s+/g, " ").trim();
		const out = {reads: t("request-cache-read"), writes: t("request-cache-write"), total: t("cost-split-total")};
		for (const k of ["input", "cache-read", "cache-write", "output"])
			out[k] = [...document.querySelectorAll('[data-testid="cost-split-' + k + '"] > *')].map(c => c.textContent.trim()).join(" ");
		return out;
	})()`))
	want := map[string]string{"reads": "20,000", "writes": "1000", "total": "$0.011262",
		"input": "Input, not cached 4 $3 $0.000012", "cache-read": "Cache reads 20,000 $0.3 $0.006",
		"cache-write": "Cache writes 1000 $3.75 $0.00375", "output": "Output 100 $15 $0.0015"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request page in Chromium (-want +got):\n%s", diff)
	}
}

// TestCacheHitWithoutInput: a key with no input in the last 24 hours shows
// no cache-hit figure on /keys ("–", not "0 %"), and neither does a request
// refused before any upstream answer.
func TestCacheHitWithoutInput(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	rows := d.logRequests(t) // team-a's second request was refused: no tokens
	c := d.signIn(t, "viewer@example.com")
	d.createKey(t, "idle", `{}`)
	keys := d.get(t, c, "/keys").want(t, http.StatusOK)
	got := map[string]string{}
	keys.testid("keys-row").Each(func(_ int, s *goquery.Selection) {
		got[strings.TrimSpace(s.Find(tid("key-link")).Text())] = strings.TrimSpace(s.Find(tid("key-cache-hit")).Text())
	})
	if diff := cmp.Diff(map[string]string{"team-a": "0 %", "team-b": "0 %", "idle": "–"}, got); diff != "" {
		t.Errorf("/keys cache hit (-want +got):\n%s", diff)
	}
	refused := d.get(t, c, "/requests/"+rows[1].ID).want(t, http.StatusOK)
	if got := strings.TrimSpace(refused.testid("request-cache-hit").Text()); got != "–" {
		t.Errorf("refused request's cache hit = %q, want –", got)
	}
}
