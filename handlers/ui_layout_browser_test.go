package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
)

// desktopWidth is the wide viewport the layout tests measure besides phoneWidth.
const desktopWidth = 1440

// layoutDash is a dashboard with a connection whose gates are busy (one adaptive,
// with a learned cap), a key, and a request log of a day: a served request, a
// refused one, one an hour ago and one spending fractions of a dollar — enough for
// every chart to draw bars and axes.
func layoutDash(t *testing.T) (*trafficDash, []store.RequestRow) {
	t.Helper()
	d := newTrafficDash(t)
	c := d.conn
	d.gates.set(live.Snapshot{
		Gates: []live.Gate{
			withLoad(connGate(c.ID), live.Gate{Cap: 8, EffectiveCap: 4, Adaptive: true, InFlight: 3, Queued: 2}),
			withLoad(modelGate(c.ID, "glm-5"), live.Gate{Cap: 1, InFlight: 1, Queued: 6}),
		},
		Clients: []live.Client{{ID: d.key.ID, Name: d.key.Name, Cap: 8, InFlight: 8, Queued: 5}},
	})
	now := time.Now().UTC()
	rows := []store.RequestRow{
		{StartedAt: now.Add(-2 * time.Hour), KeyID: d.key.ID, KeyName: d.key.Name, ConnectionID: c.ID, ConnectionName: c.Name,
			Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, TTFTMs: 12,
			TotalMs: 40, InputTokens: 120000, OutputTokens: 5000, CostMicros: 150000},
		{StartedAt: now.Add(-time.Minute), KeyID: d.key.ID, KeyName: d.key.Name, ConnectionID: c.ID, ConnectionName: c.Name,
			Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, TTFTMs: 9,
			TotalMs: 30, InputTokens: 1000, OutputTokens: 500, CostMicros: 50000},
		{StartedAt: now.Add(-30 * time.Second), KeyID: d.key.ID, KeyName: d.key.Name, Model: "glm-5", Route: "chat",
			Status: 429, Code: "SEMAPHORE_TIMEOUT", Gate: "key:" + d.key.ID, QueueMs: 200, TTFTMs: -1, TotalMs: 201},
	}
	if err := d.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatal(err)
	}
	return d, rows
}

// dashboardPages is every page of the dashboard for a signed-in admin, with a
// request's page and an unknown path (the 404 page) among them.
func dashboardPages(d *trafficDash, requestID string) []string {
	c := d.conn
	return []string{"/", "/?range=15m", "/?range=24h", "/?range=7d", "/connections", "/connections/new", "/connections/" + c.ID,
		"/connections/" + c.ID + "/delete", "/settings", "/keys", "/keys/" + d.key.ID, "/keys/" + d.key.ID + "/revoke",
		"/tokens", "/audit", "/requests", "/requests?last=1h", "/requests/" + requestID, "/usage", "/usage?range=7d",
		"/usage?range=30d", "/usage?range=15m", "/usage?range=1h", "/sessions", "/alerts", "/users", "/account", "/logout", "/no-such-page"}
}

// TestChartTextInBrowser: at 1440 and at 390 px, every tick and label of the
// overview's chart and of /usage's charts is 11 to 16 CSS px (the font computed and
// the box drawn), no two visible x labels overlap, no label leaves its chart, and
// at 1440 px the chart leaves the first connection's gates on the first screen.
// The learned ratio of an adaptive gate ("3 / 4 of 8, learned") ends before the
// queue beside it begins.
func TestChartTextInBrowser(t *testing.T) {
	t.Parallel()
	d, _ := layoutDash(t)
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	for _, width := range []int{desktopWidth, phoneWidth} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			run(t, tab, "viewport", chromedp.EmulateViewport(int64(width), 900))
			for _, path := range []string{"/", "/usage", "/usage?range=7d", "/usage?range=1h"} {
				run(t, tab, "open "+path, chromedp.Navigate(d.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(tid("chart-box"))))
				got := value(t, tab, "measure "+path, chromedp.Evaluate[map[string]any](`(() => {
					const out = {texts: 0, bad: [], overlaps: [], outside: []};
					for (const box of document.querySelectorAll('[data-testid="chart-box"]')) {
						const fig = box.closest("figure").getBoundingClientRect();
						const texts = [...box.querySelectorAll('[data-testid="chart-tick"], [data-testid="chart-xlabel"], [data-testid="chart-unit"]')];
						for (const e of texts) {
							const r = e.getBoundingClientRect(), size = parseFloat(getComputedStyle(e).fontSize);
							out.texts++;
							if (size < 11 || size > 16 || r.height < 11 || r.height > 22) out.bad.push(e.textContent + ": " + size + "px font, " + r.height + "px box");
							if (getComputedStyle(e).visibility !== "hidden" && (r.left < fig.left - 0.5 || r.right > fig.right + 0.5)) out.outside.push(e.textContent);
						}
						const xs = [...box.querySelectorAll('[data-testid="chart-xlabel"]')].filter(e => getComputedStyle(e).visibility !== "hidden")
							.map(e => ({t: e.textContent, r: e.getBoundingClientRect()}));
						for (let i = 1; i < xs.length; i++) if (xs[i].r.left < xs[i-1].r.right) out.overlaps.push(xs[i-1].t + "|" + xs[i].t);
					}
					const gate = document.querySelector('[data-testid^="gate-"][data-gate^="conn"]');
					if (gate) {
						out.ratioRight = gate.querySelector('[data-testid="ratio"]').getBoundingClientRect().right;
						out.ratio = gate.querySelector('[data-testid="ratio"]').textContent;
						out.queueLeft = gate.querySelector('.queue').getBoundingClientRect().left;
						out.ratioTop = gate.querySelector('[data-testid="ratio"]').getBoundingClientRect().bottom;
						out.queueTop = gate.querySelector('.queue').getBoundingClientRect().top;
						out.gateTop = gate.getBoundingClientRect().top + scrollY;
					}
					out.screen = innerHeight;
					return out;
				})()`))
				if got["texts"].(float64) < 8 {
					t.Errorf("%s: %v chart texts found, want ticks, labels and units", path, got["texts"])
				}
				for _, k := range []string{"bad", "overlaps", "outside"} {
					if v := got[k].([]any); len(v) > 0 {
						t.Errorf("%s at %d px: %s: %v", path, width, k, v)
					}
				}
				if path != "/" {
					continue
				}
				if !strings.Contains(fmt.Sprint(got["ratio"]), "learned") {
					t.Errorf("the adaptive gate's ratio reads %q, want its learned cap", got["ratio"])
				}
				// Beside each other on a wide screen; on a phone the queue is on a line of its own.
				if got["ratioRight"].(float64) > got["queueLeft"].(float64) && got["ratioTop"].(float64) > got["queueTop"].(float64) {
					t.Errorf("at %d px the learned ratio (right edge %v) runs into the queue (left edge %v)", width, got["ratioRight"], got["queueLeft"])
				}
				if width == desktopWidth && got["gateTop"].(float64) > got["screen"].(float64)*0.75 {
					t.Errorf("at %d px the first gate starts at %v px: the chart fills the first screen (%v px)", width, got["gateTop"], got["screen"])
				}
			}
		})
	}
}

// TestEveryPageFitsAPhoneInBrowser: at 390 px every dashboard page — the 404 page
// too — is no wider than the screen, with every "The numbers" table and every other
// disclosure open; each request's time, status, code and cost, each key's errors and
// spend, each connection's caps and each cache row's hit ratio are on screen.
func TestEveryPageFitsAPhoneInBrowser(t *testing.T) {
	t.Parallel()
	d, rows := layoutDash(t)
	tab := newBrowser(t)
	run(t, tab, "phone viewport", chromedp.EmulateViewport(phoneWidth, 844))
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	for _, p := range dashboardPages(d, rows[2].ID) {
		run(t, tab, "open "+p, chromedp.Navigate(d.srv.URL+p), chromedp.WaitReady(chromedp.CSS("main")))
		got := value(t, tab, "measure "+p, chromedp.Evaluate[map[string]any](`(() => {
			const opened = [...document.querySelectorAll("details")].filter(e => !e.open);
			opened.forEach(e => e.open = true);
			const cells = [...document.querySelectorAll('[data-testid="request-row"] :is(.c-when, .c-status, .c-code, .c-cost), ' +
				'[data-testid="key-spend"], [data-testid="key-spend-month"], [data-testid="key-errors"], [data-testid="cache-hit"], [data-testid="caps"]')];
			const off = cells.filter(e => { const r = e.getBoundingClientRect(); return r.left < 0 || r.right > innerWidth; })
				.map(e => (e.dataset.testid || e.className) + "@" + Math.round(e.getBoundingClientRect().right));
			return {width: document.documentElement.scrollWidth, viewport: innerWidth, opened: opened.length, off: off, cells: cells.length,
				rows: document.querySelectorAll('[data-testid="request-row"]').length};
		})()`))
		if w := got["width"].(float64); w > phoneWidth || got["viewport"].(float64) != phoneWidth {
			t.Errorf("%s is %v px wide at a %v px viewport (%v disclosures opened), want ≤ %d", p, w, got["viewport"], got["opened"], phoneWidth)
		}
		if off := got["off"].([]any); len(off) > 0 {
			t.Errorf("%s: request cells off screen: %v", p, off)
		}
		if p == "/requests" && got["rows"].(float64) != 3 {
			t.Errorf("/requests shows %v rows, want 3", got["rows"])
		}
		if (p == "/" || p == "/usage" || p == "/requests") && got["cells"].(float64) < 3 {
			t.Errorf("%s: %v spend, status, code or cache cells found, want them all", p, got["cells"])
		}
		if p == "/usage" && got["opened"].(float64) < 4 {
			t.Errorf("/usage opened %v tables, want one per chart", got["opened"])
		}
	}
}

// TestNotFoundPageInBrowser: an unknown dashboard path answers 404 with a page in
// the dashboard's layout (its navigation, the words, a way back) that fits a phone,
// signed in or not; an unknown API path keeps its problem+json 404.
func TestNotFoundPageInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	tab := newBrowser(t)
	run(t, tab, "phone viewport", chromedp.EmulateViewport(phoneWidth, 844))
	check := func(signedIn bool) {
		t.Helper()
		res, err := chromedp.RunResponse(tab, chromedp.Navigate(d.srv.URL+"/connections/x/y/z"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != http.StatusNotFound {
			t.Errorf("unknown path: status %d, want 404", res.Status)
		}
		got := value(t, tab, "read the page", chromedp.Evaluate[map[string]any](`({
			nav: document.querySelectorAll("header.top nav a").length, css: !!document.querySelector('link[rel=stylesheet]'),
			heading: document.querySelector('[data-testid="error-page"] h1').textContent.replace(/\s+/g, " ").trim(),
			message: document.querySelector('[data-testid="error-message"]').textContent,
			width: document.documentElement.scrollWidth, back: document.querySelector('[data-testid="error-page"] a[href="/"]') !== null})`))
		if got["heading"] != "404 Not found" || got["message"] != "There is nothing at this address." || got["back"] != true || got["css"] != true {
			t.Errorf("404 page (signed in %v): %v", signedIn, got)
		}
		if signedIn && got["nav"].(float64) < 5 {
			t.Errorf("404 page signed in: %v navigation links, want the dashboard's", got["nav"])
		}
		if got["width"].(float64) > phoneWidth {
			t.Errorf("404 page is %v px wide at %d px", got["width"], phoneWidth)
		}
	}
	check(false)
	browserSignIn(t, tab, d.srv.URL, "viewer@example.com")
	check(true)

	res, err := http.Get(d.srv.URL + "/api/v1/no-such-thing")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("unknown API path: %d %s, want 404 application/problem+json", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

// TestRequestsLiveInBrowser: /requests shows a request sent through the gateway
// after the page loaded, without a reload, with its date and zone; "last hour"
// leaves out a request of two hours ago, and keeps following new ones.
func TestRequestsLiveInBrowser(t *testing.T) {
	t.Parallel()
	d, rows := layoutDash(t)
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "viewer@example.com")
	for _, width := range []int{desktopWidth, phoneWidth} {
		run(t, tab, "viewport", chromedp.EmulateViewport(int64(width), 900))
		run(t, tab, "open requests", chromedp.Navigate(d.srv.URL+"/requests"), chromedp.WaitVisible(chromedp.CSS(tid("request-table"))))
		n := value(t, tab, "rows", chromedp.Evaluate[int](`window.notReloaded = true, document.querySelectorAll('[data-testid="request-row"]').length`))
		if st := d.chat(t, trafficClientKey, "glm-5"); st != http.StatusOK {
			t.Fatalf("chat: %d", st)
		}
		got := value(t, tab, "the new row", chromedp.Poll[map[string]any](`(() => {
			const rows = document.querySelectorAll('[data-testid="request-row"]');
			if (rows.length !== `+fmt.Sprint(n+1)+` || !window.notReloaded) return false;
			const r = rows[0].querySelector('[data-testid="request-status"]').getBoundingClientRect();
			return {time: rows[0].querySelector('[data-testid="request-time"]').textContent, status: rows[0].dataset.status, right: r.right, width: innerWidth};
		})()`))
		if !strings.HasPrefix(fmt.Sprint(got["time"]), time.Now().UTC().Format("2006-01-02")) || !strings.HasSuffix(fmt.Sprint(got["time"]), " UTC") ||
			got["status"] != "200" || got["right"].(float64) > got["width"].(float64) {
			t.Errorf("at %d px the new row: %v, want today's date, the zone and its status on screen", width, got)
		}
	}

	run(t, tab, "open requests", chromedp.Navigate(d.srv.URL+"/requests"), chromedp.WaitVisible(chromedp.CSS(tid("filter-last"))))
	run(t, tab, "last hour", chromedp.SetValue(chromedp.CSS(tid("filter-last")), "1h"))
	if st := submit(t, tab, tid("filter-apply")); st != http.StatusOK {
		t.Fatalf("filter: %d", st)
	}
	ids := value(t, tab, "rows of the last hour", chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="request-row"]')].map(r => r.dataset.id)`))
	if len(ids) != len(rows)+1 || strings.Contains(strings.Join(ids, " "), rows[0].ID) {
		t.Errorf("last hour: rows %v, want the %d newest and not %s (two hours old)", ids, len(rows)+1, rows[0].ID)
	}
	if loc := value(t, tab, "location", chromedp.Location()); !strings.Contains(loc, "last=1h") {
		t.Errorf("the filter's address %q does not keep the range", loc)
	}
	run(t, tab, "mark", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	if st := d.chat(t, trafficClientKey, "glm-5"); st != http.StatusOK {
		t.Fatalf("chat: %d", st)
	}
	value(t, tab, "a new row in the last hour", chromedp.Poll[bool](`window.notReloaded && document.querySelectorAll('[data-testid="request-row"]').length === `+fmt.Sprint(len(ids)+1)))
}

// TestUsageLiveInBrowser: /usage counts a request sent after the page loaded,
// without a reload, and a table of numbers someone opened stays open as it is redrawn.
func TestUsageLiveInBrowser(t *testing.T) {
	t.Parallel()
	d, _ := layoutDash(t)
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "viewer@example.com")
	run(t, tab, "open usage", chromedp.Navigate(d.srv.URL+"/usage"), chromedp.WaitVisible(chromedp.CSS(tid("chart-requests"))))
	served := `[...document.querySelectorAll('[data-testid="chart-requests"] [data-testid="chart-table"] tbody tr')].reduce((n, r) => n + Number(r.children[1].textContent), 0)`
	before := value(t, tab, "served so far", chromedp.Evaluate[int](`window.notReloaded = true,
		document.querySelector('[data-testid="chart-requests"] details').open = true, `+served))
	if st := d.chat(t, trafficClientKey, "glm-5"); st != http.StatusOK {
		t.Fatalf("chat: %d", st)
	}
	// The page polls every 10 s: up to a minute for two or three polls on a busy machine.
	ctx, cancel := context.WithTimeout(tab, time.Minute)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Poll[map[string]any](`(() => {
		const n = `+served+`;
		return window.notReloaded && n > `+fmt.Sprint(before)+` && {served: n, open: document.querySelector('[data-testid="chart-requests"] details').open};
	})()`))
	if err != nil {
		t.Fatalf("/usage did not count the request without a reload: %v", err)
	}
	if got["served"] != float64(before+1) || got["open"] != true {
		t.Errorf("after one more request: %v, want %d served and the table still open", got, before+1)
	}
}
