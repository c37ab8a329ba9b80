package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// pollRows waits until the request log holds a row cond accepts (rows reach
// it about a second after their request ends) and returns it.
func pollRows(t *testing.T, st *store.Store, what string, cond func(store.RequestRow) bool) store.RequestRow {
	t.Helper()
	deadline := time.Now().Add(browserStep)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rows, _, err := st.ListRequests(t.Context(), store.RequestFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if cond(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no such row in the request log", what)
		}
		<-tick.C
	}
}

// TestWhyAndCostInBrowser: a real gateway with two connections, a real request
// log and a real Chromium at 1440 and 390 px.
//   - A request fails over: connection a answers 500, b serves it. Its page
//     lists both attempts (a's 500 with its code, then b's 200) and a's message,
//     escaped; a's breaker (one failure opens it) shows on /connections.
//   - "Test connection" on a reaches its upstream with the breaker open, and a
//     stays breaker-open.
//   - The cost ranking on /usage and the overview counts glm-4.7 asked as an
//     alias, as zai/glm-4.7 and as itself as one model, above glm-5, with the
//     request of no model apart.
//   - With the upstream holding requests, a key capped at one in flight has two
//     waiting at its cap: the overview names it with its cap.
func TestWhyAndCostInBrowser(t *testing.T) {
	t.Parallel()
	d := newTrafficDashWith(t, true)
	b := d.createConnection(t, "zai-backup", `{}`)
	one := 1
	price, cheap := limits.Micros(10_000_000), limits.Micros(1_000_000)
	apply := func() {
		d.gw.Apply(gateway.Config{
			Settings: limits.Settings{BreakerFailures: &one, BreakerCooldownMs: new(3600000),
				Aliases: map[string]string{"glm": "glm-4.7"},
				Prices:  limits.Prices{"glm-4.7": {Input: &price, Output: &price}, "glm-5": {Input: &cheap, Output: &cheap}}},
			Connections: []gateway.Connection{
				{ID: d.conn.ID, Name: d.conn.Name, Provider: "zai", APIStyle: "openai", BaseURL: d.upURL, Priority: 10,
					APIKey: "upstream-key-a", Models: []string{"glm-5", "glm-4.7"}, Enabled: true},
				{ID: b.ID, Name: b.Name, Provider: "zai", APIStyle: "openai", BaseURL: d.upURL,
					APIKey: "upstream-key-b", Models: []string{"glm-5", "glm-4.7"}, Enabled: true},
			},
			ClientKeys: []gateway.ClientKey{{ID: d.key.ID, Name: d.key.Name, Enabled: true,
				Limits: limits.ClientKeyLimits{MaxConcurrent: &one}}},
		})
	}
	apply()
	if err := d.up.SetKeyBehavior("upstream-key-a", upstreamtest.Behavior{Fail: "500", FailTimes: 1}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"glm-4.7", "glm", "zai/glm-4.7", "glm-5"} {
		if st := d.chat(t, trafficClientKey, m); st != http.StatusOK {
			t.Fatalf("chat %s: status %d", m, st)
		}
	}
	failedOver := pollRows(t, d.store, "the failed-over request", func(r store.RequestRow) bool { return r.Attempts == 2 })
	pollRows(t, d.store, "every request", func(r store.RequestRow) bool { return r.Model == "glm-5" })
	// A request of no model, and one whose stored upstream message holds markup.
	markup := `{"error":"<img src=x onerror=alert(1)> overloaded"}`
	written := []store.RequestRow{
		{StartedAt: time.Now().UTC(), KeyID: d.key.ID, KeyName: d.key.Name, Route: "chat", Status: 400, Code: "INVALID_REQUEST", TTFTMs: -1},
		{StartedAt: time.Now().UTC(), KeyID: d.key.ID, KeyName: d.key.Name,
			ConnectionID: b.ID, ConnectionName: b.Name, Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5", Route: "chat",
			Status: 503, Code: "UPSTREAM_UNAVAILABLE", Attempts: 1, TTFTMs: -1, UpstreamError: markup},
	}
	if err := d.store.WriteRequests(t.Context(), written); err != nil {
		t.Fatal(err)
	}
	upA := func() int64 { return d.up.Stats().ByKey["upstream-key-a"].Requests }

	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	txt := `const txt = el => el ? el.textContent.replace(/\s+/g, " ").trim() : "";`
	fits := `const fits = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= innerWidth; };`
	for _, width := range []int64{1440, phoneWidth} {
		w := strconv.FormatInt(width, 10)
		run(t, tab, "viewport "+w, chromedp.EmulateViewport(width, 900))

		// The failed-over request: both attempts and a's message.
		run(t, tab, "open the request", chromedp.Navigate(d.srv.URL+"/requests/"+failedOver.ID), chromedp.WaitVisible(chromedp.CSS(tid("attempts"))))
		got := value(t, tab, "attempts at "+w, chromedp.Evaluate[map[string]any](`(() => { `+txt+fits+`
			const rows = [...document.querySelectorAll('[data-testid="attempt"]')];
			return {rows: rows.map(r => [txt(r.querySelector('[data-testid="attempt-connection"]')), txt(r.querySelector('[data-testid="attempt-status"]')),
					txt(r.querySelector('[data-testid="attempt-code"] code'))].join(" ")),
				visible: rows.every(r => ['attempt-connection', 'attempt-status', 'attempt-code'].every(c => fits(r.querySelector('[data-testid="' + c + '"]')))),
				message: txt(document.querySelector('[data-testid="upstream-error-text"]')),
				width: document.documentElement.scrollWidth};
		})()`))
		wantRows := []any{d.conn.Name + " 500 UPSTREAM_UNAVAILABLE", b.Name + " 200 "}
		if rows := got["rows"].([]any); len(rows) != 2 || rows[0] != wantRows[0] || strings.TrimSpace(rows[1].(string)) != strings.TrimSpace(wantRows[1].(string)) {
			t.Errorf("%s px: attempts = %q, want %q", w, got["rows"], wantRows)
		}
		if !strings.Contains(got["message"].(string), "injected failure 500") || got["visible"] != true || got["width"].(float64) > float64(width) {
			t.Errorf("%s px: message %q, cells visible %v, page width %v", w, got["message"], got["visible"], got["width"])
		}
		// An upstream message holding markup is shown as text.
		run(t, tab, "open the request with markup", chromedp.Navigate(d.srv.URL+"/requests/"+written[1].ID),
			chromedp.WaitVisible(chromedp.CSS(tid("upstream-error-text"))))
		esc := value(t, tab, "escaped message", chromedp.Evaluate[map[string]any](`(() => {
			const pre = document.querySelector('[data-testid="upstream-error-text"]');
			return {text: pre.textContent, elements: pre.children.length, img: document.querySelectorAll('main img').length};
		})()`))
		if esc["text"] != markup || esc["elements"].(float64) != 0 || esc["img"].(float64) != 0 {
			t.Errorf("%s px: the upstream's message %v, want the markup as text", w, esc)
		}

		// a's breaker shows on the list; the test reaches a's upstream and leaves it open.
		connState := func(what string) map[string]any {
			return value(t, tab, what, chromedp.Evaluate[map[string]any](`(() => { `+txt+fits+`
				const c = document.querySelector('[data-conn="`+d.conn.ID+`"] [data-testid="connection-health"]');
				return {health: c.dataset.health, text: txt(c), visible: fits(c)};
			})()`))
		}
		run(t, tab, "open connections", chromedp.Navigate(d.srv.URL+"/connections"), chromedp.WaitVisible(chromedp.CSS(tid("connections-table"))))
		if s := connState("a's state"); s["health"] != live.HealthBreakerOpen || !strings.Contains(s["text"].(string), "breaker open") || s["visible"] != true {
			t.Errorf("%s px: a on /connections = %v, want breaker open, visible", w, s)
		}
		before := upA()
		run(t, tab, "open a", chromedp.Navigate(d.srv.URL+"/connections/"+d.conn.ID), chromedp.WaitVisible(chromedp.CSS(tid("probe"))))
		if st := submit(t, tab, tid("probe")); st != http.StatusOK {
			t.Fatalf("%s px: test connection: status %d", w, st)
		}
		outcome := value(t, tab, "probe result", chromedp.Evaluate[string](`document.querySelector('[data-testid="probe-result"]').dataset.outcome`))
		if outcome != "ok" || upA() != before+1 {
			t.Errorf("%s px: test of a with its breaker open: outcome %q, a's upstream got %d requests (before %d); want ok, reached",
				w, outcome, upA(), before)
		}
		run(t, tab, "connections after the test", chromedp.Navigate(d.srv.URL+"/connections"), chromedp.WaitVisible(chromedp.CSS(tid("connections-table"))))
		if s := connState("a's state after the test"); s["health"] != live.HealthBreakerOpen {
			t.Errorf("%s px: a after a good test = %v, want still breaker open", w, s)
		}

		// The cost ranking, on /usage and the overview.
		for _, path := range []string{"/usage", "/"} {
			run(t, tab, "open "+path, chromedp.Navigate(d.srv.URL+path), chromedp.WaitVisible(chromedp.CSS(tid("cost-model"))))
			rank := value(t, tab, "cost ranking on "+path, chromedp.Evaluate[map[string]any](`(() => { `+txt+fits+`
				const t = document.querySelector('[data-testid="cost-model"]');
				const rows = [...t.querySelectorAll('tbody [data-testid="cost-row"]')];
				return {rows: rows.map(r => [txt(r.querySelector('th')), txt(r.querySelector('[data-testid="cost-requests"]')), txt(r.querySelector('[data-testid="cost-usd"]'))].join(" ")),
					none: txt(t.querySelector('tfoot [data-testid="cost-none"] th')),
					visible: rows.every(r => fits(r.querySelector('[data-testid="cost-usd"]'))),
					width: document.documentElement.scrollWidth};
			})()`))
			want := []any{"glm-4.7 3 $0.009", "glm-5 2 $0.0003"}
			if rows := rank["rows"].([]any); len(rows) != 2 || rows[0] != want[0] || rows[1] != want[1] {
				t.Errorf("%s px %s: models by cost = %q, want %q", w, path, rank["rows"], want)
			}
			if rank["none"] != "(no model)" || rank["visible"] != true || rank["width"].(float64) > float64(width) {
				t.Errorf("%s px %s: no model %q, cost cells visible %v, page width %v", w, path, rank["none"], rank["visible"], rank["width"])
			}
		}
	}

	// Waiters at the key's own cap: the upstream holds every request; of three,
	// one holds the key's only slot and two wait at the key's cap.
	hold := make(chan struct{})
	if err := d.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(hold)
		wg.Wait()
	})
	for range 3 {
		wg.Go(func() { chatStatus(d.srv.URL, trafficClientKey, "glm-5") })
	}
	for _, width := range []int64{1440, phoneWidth} {
		w := strconv.FormatInt(width, 10)
		run(t, tab, "viewport "+w, chromedp.EmulateViewport(width, 900), chromedp.Navigate(d.srv.URL+"/"))
		line := value(t, tab, "key-cap waiters at "+w, chromedp.Poll[map[string]any](`(() => { `+txt+fits+`
			const li = document.querySelector('[data-testid="key-cap"][data-client="`+d.key.ID+`"]');
			if (!li || !txt(li).includes("2 waiting")) return false;
			return {label: txt(document.querySelector('[data-testid="key-caps"] .waiting-label')), line: txt(li),
				visible: fits(li.querySelector('[data-testid="key-cap-detail"]')), width: document.documentElement.scrollWidth};
		})()`))
		if line["line"] != d.key.Name+": 1/1, 2 waiting at the key's cap" || line["visible"] != true || line["width"].(float64) > float64(width) {
			t.Errorf("%s px: key-cap line %v", w, line)
		}
	}

	// Every part of these pages passes axe, light and dark.
	t.Run("axe", func(t *testing.T) {
		axe := axeSource(t)
		for _, scheme := range []string{"light", "dark"} {
			run(t, tab, "colour scheme", colorScheme(scheme))
			browserSignIn(t, tab, d.srv.URL, "admin@example.com")
			for _, p := range []string{"/", "/connections", "/usage", "/requests/" + failedOver.ID, "/requests/" + written[1].ID} {
				axeCheck(t, tab, axe, d.srv.URL+p, scheme)
			}
		}
	})
}

// axeCheck runs axe (WCAG 2.1 A and AA, best practices) on url and reports
// every violation.
func axeCheck(t *testing.T, tab context.Context, axe, url, scheme string) {
	t.Helper()
	run(t, tab, "open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main")), chromedp.Evaluate[chromedp.Void](axe))
	ctx, cancel := context.WithTimeout(tab, time.Minute)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"],
		runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}})
		.then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe on %s: %v", url, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		t.Fatalf("axe result: %v", err)
	}
	for _, v := range vs {
		var where []string
		for _, n := range v.Nodes {
			b, _ := json.Marshal(n.Target)
			where = append(where, string(b)+" "+strings.ReplaceAll(n.Summary, "\n", " "))
		}
		t.Errorf("%s (%s): %s [%s]: %s", url, scheme, v.ID, v.Impact, strings.Join(where, "; "))
	}
}
