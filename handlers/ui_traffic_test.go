package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// storeRequestLog hands the gateway's records to a store.RequestLog, as cmd does.
type storeRequestLog struct{ l *store.RequestLog }

func (s *storeRequestLog) Record(r *gateway.RequestRecord) { s.l.Add(r) }

const trafficClientKey = "traffic-client-key-0123456789"

// trafficDash is a dashboard whose /v1 is a real gateway with one connection
// (zai-main, glm-5, a fake upstream reporting 300 tokens) and one client key
// (team-a, secret trafficClientKey), writing the real request log.
type trafficDash struct {
	*dash
	conn  store.Connection
	key   store.ClientKey
	gw    *gateway.Gateway
	up    *upstreamtest.Server
	upURL string // the fake upstream's base URL, for gateway.Connection.BaseURL
}

func newTrafficDash(t *testing.T) *trafficDash { return newTrafficDashWith(t, false) }

// newTrafficDashWith is newTrafficDash; with liveGates the dashboard's live view is
// the gateway's own (its gates, queues and waits) rather than one the test sets.
func newTrafficDashWith(t *testing.T, liveGates bool) *trafficDash {
	t.Helper()
	up := upstreamtest.NewServer(upstreamtest.Options{UsageTokens: 300})
	upSrv := httptest.NewServer(up)
	var key store.ClientKey
	rl := &storeRequestLog{}
	gw := gateway.New(gateway.Options{Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
		return gateway.ClientKey{ID: key.ID, Name: key.Name, Enabled: true}, s == trafficClientKey
	}, RequestLog: rl})
	d := newDashWith(t, func(deps *Deps) {
		deps.Gateway = gw
		deps.Prober = gatewayProber{gw}
		if liveGates {
			deps.Gates = gw
		}
	}, func(s *Server) {
		rl.l = s.core.Store().NewRequestLog(store.RequestLogOptions{})
	})
	l := rl.l
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = up.Close()
		gw.Close()
		upSrv.Close()
	})
	td := &trafficDash{dash: d, gw: gw, up: up, upURL: upSrv.URL + "/v1"}
	td.key = d.createKey(t, "team-a", `{}`)
	key = td.key
	td.conn = d.createConnection(t, "zai-main", `{}`)
	gw.Apply(gateway.Config{Connections: []gateway.Connection{{
		ID: td.conn.ID, Name: td.conn.Name, Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
	}}})
	return td
}

// chat sends one chat completion through the gateway with secret and model, and
// returns the status.
func (d *trafficDash) chat(t *testing.T, secret, model string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// TestOverviewErrorsInBrowser: a real Chromium on the overview; requests through
// the real gateway — one served, three for an unknown model (404) and three with a
// bad key (401) — appear without a reload: the last minute's error count rises to 6
// and names both codes, each linked to its requests; the connection shows its
// request and today's tokens, the key its 404s and tokens.
func TestOverviewErrorsInBrowser(t *testing.T) {
	t.Parallel()
	d := newTrafficDash(t)
	base := d.srv.URL
	tab := newBrowser(t)
	browserSignIn(t, tab, base, "viewer@example.com")
	run(t, tab, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(tid("sum-errors"))))
	if got := value(t, tab, "errors at load", chromedp.Text(chromedp.CSS(tid("sum-errors")))); got != "0" {
		t.Fatalf("errors in the last minute at load = %q, want 0", got)
	}
	run(t, tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	if st := d.chat(t, trafficClientKey, "glm-5"); st != http.StatusOK {
		t.Fatalf("served request: status %d", st)
	}
	for range 3 {
		if st := d.chat(t, trafficClientKey, "no-such-model"); st != http.StatusNotFound {
			t.Fatalf("unknown model: status %d, want 404", st)
		}
		if st := d.chat(t, "not-a-key-0123456789", "glm-5"); st != http.StatusUnauthorized {
			t.Fatalf("bad key: status %d, want 401", st)
		}
	}

	// The page polls /live; wait (bounded by browserStep) for the count to rise.
	got := value(t, tab, "errors after 404s and 401s", chromedp.Poll[string](`(() => {
		const n = document.querySelector('[data-testid="sum-errors"]');
		return n && n.textContent === "6" && window.notReloaded ? n.textContent : false;
	})()`))
	if got != "6" {
		t.Fatalf("errors in the last minute = %q, want 6", got)
	}
	codes := value(t, tab, "codes named", chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-live-fragment="sum-errors"] [data-testid="error-code"]')].map(a => a.textContent + " -> " + new URL(a.href).search)`))
	if len(codes) != 2 {
		t.Fatalf("codes named %q, want two", codes)
	}
	for i, want := range []struct{ text, status string }{{"3 × 401 INVALID_API_KEY", "401"}, {"3 × 404 MODEL_NOT_FOUND", "404"}} {
		if !strings.HasPrefix(codes[i], want.text+" -> ") || !strings.Contains(codes[i], "status="+want.status) {
			t.Errorf("code %d = %q, want %q linked to its requests", i, codes[i], want)
		}
	}
	conn := value(t, tab, "connection traffic", chromedp.Poll[string](`(() => {
		const p = document.querySelector('[data-live-fragment="conn-`+d.conn.ID+`"]');
		const s = p && p.textContent.replace(/\s+/g, " ").trim();
		return s && s.includes("300 tokens") ? s : false;
	})()`))
	if !strings.HasPrefix(conn, "1 request in the last minute · 0 errors in the last minute") {
		t.Errorf("connection traffic %q", conn)
	}
	key := value(t, tab, "key traffic", chromedp.Evaluate[[]string](`(() => {
		const r = document.querySelector('[data-testid="key-traffic-row"][data-key="`+d.key.ID+`"]');
		return r ? ["key-rpm", "key-errors", "key-tokens"].map(id => r.querySelector('[data-testid="' + id + '"]').textContent.replace(/\s+/g, " ").trim()) : [];
	})()`))
	if strings.Join(key, " | ") != "4 | 3 3 × 404 MODEL_NOT_FOUND | 300" {
		t.Errorf("key row %q, want 4 | 3 3 × 404 MODEL_NOT_FOUND | 300", key)
	}
}

// TestOverviewChartInBrowser: the overview's requests chart, drawn on the server
// from the request log, has a title and description for screen readers, axes with
// their unit and a legend; each time range is a plain link (no script needed), and
// choosing one changes the buckets and what they hold (one served request and one
// refused by Gatehouse, a 404 for an unknown model).
func TestOverviewChartInBrowser(t *testing.T) {
	t.Parallel()
	d := newTrafficDash(t)
	d.chat(t, trafficClientKey, "glm-5")
	d.chat(t, trafficClientKey, "no-such-model")
	deadline := time.Now().Add(browserStep)
	for {
		rows, err := d.store.RecentTraffic(t.Context(), time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request log holds %v, want both requests", rows)
		}
		time.Sleep(50 * time.Millisecond) // polling the database for the writer's flush, bounded by deadline
	}
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "viewer@example.com")
	chart := func(rangeID string) map[string]any {
		t.Helper()
		if rangeID == "" {
			run(t, tab, "open overview", chromedp.Navigate(d.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(tid("overview-chart"))))
		} else {
			run(t, tab, "choose "+rangeID, chromedp.Click(chromedp.CSS(tid("range-"+rangeID))),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="overview-chart"][data-range="`+rangeID+`"]`)))
		}
		return value(t, tab, "read the chart", chromedp.Evaluate[map[string]any](`(() => {
			const f = document.querySelector('[data-testid="overview-chart"]');
			const svg = f.querySelector('svg[role="img"]');
			const rows = [...f.querySelectorAll('[data-testid="chart-table"] tbody tr')].map(r => [...r.children].map(c => c.textContent.trim()));
			return {range: f.dataset.range, title: svg.querySelector("title").textContent, desc: !!svg.querySelector("desc").textContent,
				unit: f.querySelector('[data-testid="chart-unit"]').textContent, ticks: f.querySelectorAll('[data-testid="chart-tick"]').length,
				legend: [...f.querySelectorAll('[data-testid="chart-legend"] li')].map(l => l.textContent.trim()).join(", "),
				bars: f.querySelectorAll('[data-testid="chart-bar"]').length, buckets: rows.length,
				served: rows.reduce((n, r) => n + Number(r[1]), 0), refused: rows.reduce((n, r) => n + Number(r[3]), 0),
				current: f.querySelector('.ranges [aria-current="page"]').dataset.testid};
		})()`))
	}
	hour := chart("")
	if hour["range"] != "1h" || hour["title"] != "Requests, last hour" || hour["desc"] != true || hour["unit"] != "requests" ||
		hour["ticks"].(float64) < 3 || hour["legend"] != "served, failed, refused by Gatehouse" || hour["bars"].(float64) < 2 ||
		hour["buckets"] != 60.0 || hour["served"] != 1.0 || hour["refused"] != 1.0 || hour["current"] != "range-1h" {
		t.Errorf("the last hour's chart: %v", hour)
	}
	week := chart("7d")
	if week["title"] != "Requests, last 7 days" || week["buckets"] != 7.0 || week["served"] != 1.0 || week["current"] != "range-7d" {
		t.Errorf("the last week's chart: %v", week)
	}
	quarter := chart("15m")
	if quarter["buckets"] != 15.0 || quarter["served"] != 1.0 || quarter["current"] != "range-15m" {
		t.Errorf("the last 15 minutes' chart: %v", quarter)
	}
}

// TestConnectionLiveInBrowser: a connection's page shows it right now — its gates'
// load, updated by /live without a reload, its health, the last minute's requests
// from the request log, and a link to its requests.
func TestConnectionLiveInBrowser(t *testing.T) {
	t.Parallel()
	d := newTrafficDash(t)
	id := d.conn.ID
	d.gates.set(live.Snapshot{Gates: []live.Gate{withLoad(connGate(id), live.Gate{Cap: 4, InFlight: 1})},
		Connections: []live.Connection{{ID: id, Health: live.HealthOK}}})
	if st := d.chat(t, trafficClientKey, "glm-5"); st != http.StatusOK {
		t.Fatalf("served request: status %d", st)
	}
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "viewer@example.com")
	run(t, tab, "open the connection", chromedp.Navigate(d.srv.URL+"/connections/"+id),
		chromedp.WaitVisible(chromedp.CSS(tid("connection-live"))))
	row := tid("connection-live") + " " + tid("gate-"+connGate(id).Key)
	if got := value(t, tab, "ratio", chromedp.Text(chromedp.CSS(row+" "+tid("ratio")))); got != "1 / 4" {
		t.Errorf("ratio at load %q, want 1 / 4", got)
	}
	run(t, tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	d.gates.set(live.Snapshot{Gates: []live.Gate{withLoad(connGate(id), live.Gate{Cap: 4, InFlight: 4, Queued: 3})},
		Connections: []live.Connection{{ID: id, Health: live.HealthCooling, Reason: "429 from upstream"}}})
	got := value(t, tab, "live load and health", chromedp.Poll[string](`(() => {
		const box = document.querySelector('[data-testid="connection-live"]');
		const r = box.querySelector('[data-gate]');
		const s = r.querySelector('[data-testid="ratio"]').textContent + " | " + r.querySelector('[data-testid="queued"]').textContent +
			" | " + box.querySelector('[data-testid="health"]').dataset.health;
		return s === "4 / 4 | 3 | cooling" && window.notReloaded ? s : false;
	})()`))
	if got != "4 / 4 | 3 | cooling" {
		t.Errorf("live load and health %q", got)
	}
	traffic := value(t, tab, "traffic", chromedp.Poll[string](`(() => {
		const p = document.querySelector('[data-testid="connection-live"] [data-live-fragment="conn-`+id+`"]');
		const s = p && p.textContent.replace(/\s+/g, " ").trim();
		return s && s.startsWith("1 request in the last minute") ? s : false;
	})()`))
	if !strings.Contains(traffic, "0 errors in the last minute") {
		t.Errorf("traffic %q", traffic)
	}
	// Every gate row fits the block at the desktop width: its columns never
	// run past the block's border (they did by ~30 px at 1440 px).
	overflow := value(t, tab, "rows fit", chromedp.Evaluate[string](`(() => {
		const box = document.querySelector('[data-testid="connection-live"]');
		const right = box.getBoundingClientRect().right;
		const bad = [];
		for (const r of box.querySelectorAll('[data-gate]')) {
			for (const el of [r, ...r.children]) {
				if (el.getBoundingClientRect().right > right + 0.5 || el.scrollWidth > el.clientWidth + 1 && el === r) {
					bad.push((el.className || el.tagName) + " of " + r.dataset.gate + ": right " + Math.round(el.getBoundingClientRect().right) + " > " + Math.round(right));
				}
			}
		}
		return bad.join("; ");
	})()`))
	if overflow != "" {
		t.Errorf("a gate row runs past the connection block: %s", overflow)
	}
	href := value(t, tab, "requests link", chromedp.Evaluate[string](`document.querySelector('[data-testid="connection-live"] [data-testid="conn-requests"]').getAttribute("href")`))
	if href != "/requests?connection="+id {
		t.Errorf("requests link %q", href)
	}
}
