package handlers

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestOverviewQueueLiveInBrowser: a real Chromium on the overview of a real gateway
// whose connection admits one request at a time. The fake upstream holds the requests
// it gets, so 12 of 13 queue: without a reload, the waiting-keys line names the key
// with its 12 queued; the upstream lets one go (the next one admitted is held again),
// and the line falls to 11. The summary's p99 wait and the connection's p50/p99, each
// naming its window, change once the request that queued is admitted. Counted, not
// timed: every step waits for what the page shows, within browserStep.
func TestOverviewQueueLiveInBrowser(t *testing.T) {
	t.Parallel()
	d := newTrafficDashWith(t, true)
	holdFirst, holdNext := make(chan struct{}), make(chan struct{})
	if err := d.up.SetDefault(upstreamtest.Behavior{Hold: holdFirst}); err != nil {
		t.Fatal(err)
	}
	one, wait := 1, 120000
	d.gw.Apply(gateway.Config{
		Connections: []gateway.Connection{{
			ID: d.conn.ID, Name: d.conn.Name, Provider: "zai", APIStyle: "openai", BaseURL: d.upURL,
			APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
			Overrides: limits.Overrides{MaxConcurrent: &one, MaxWaitMs: &wait},
		}},
		ClientKeys: []gateway.ClientKey{{ID: d.key.ID, Name: d.key.Name, Enabled: true}},
	})

	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "viewer@example.com")
	run(t, tab, "open overview", chromedp.Navigate(d.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(tid("conn-"+d.conn.ID))))
	run(t, tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	var wg sync.WaitGroup
	statuses := make(chan int, 13)
	t.Cleanup(func() {
		// Let every held request finish before the servers close.
		select {
		case <-holdNext:
		default:
			close(holdNext)
		}
		select {
		case <-holdFirst:
		default:
			close(holdFirst)
		}
		wg.Wait()
	})
	for range 13 {
		wg.Go(func() { statuses <- chatStatus(d.srv.URL, trafficClientKey, "glm-5") })
	}

	block := `document.querySelector('[data-testid="conn-` + d.conn.ID + `"]')`
	// waitingLine polls until the block's waiting line reads want queued for the
	// key, and returns the line with the waits the page shows.
	waitingLine := func(what, want string) map[string]string {
		t.Helper()
		return value(t, tab, what, chromedp.Poll[map[string]string](`(() => {
			const b = `+block+`;
			const li = b && b.querySelector('[data-testid="waiting-key"]');
			const txt = el => el ? el.textContent.replace(/\s+/g, " ").trim() : "";
			const p99 = document.querySelector('[data-testid="sum-p99-value"]');
			const gw = b && b.querySelector('[data-testid="wait-p99"]');
			if (!li || !window.notReloaded || !txt(li.querySelector('[data-testid="waiting-detail"]')).includes("· `+want+` queued") || !p99 || !gw) return false;
			return {label: txt(b.querySelector('.waiting-label')), name: txt(li.querySelector('[data-testid="waiting-name"]')),
				detail: txt(li.querySelector('[data-testid="waiting-detail"]')), p99: txt(p99),
				p99Window: txt(document.querySelector('[data-testid="sum-p99-window"]')),
				connP99: txt(gw), connWindow: txt(b.querySelector('[data-testid="wait-window"]')),
				queued: txt(b.querySelector('[data-testid="queued"]'))};
		})()`))
	}
	before := waitingLine("12 waiting", "12")
	if before["label"] != "Waiting at connection:" || before["name"] != d.key.Name || before["detail"] != "· 12 queued · weight 1" ||
		before["queued"] != "12" {
		t.Errorf("the waiting line with 12 queued: %v", before)
	}
	for _, k := range []string{"p99Window", "connWindow"} {
		if !strings.HasPrefix(before[k], "over the last ") {
			t.Errorf("%s = %q, want the window named", k, before[k])
		}
	}

	// The upstream answers the request it holds; the next one admitted is held again.
	if err := d.up.SetDefault(upstreamtest.Behavior{Hold: holdNext}); err != nil {
		t.Fatal(err)
	}
	close(holdFirst)
	if st := <-statuses; st != http.StatusOK {
		t.Fatalf("the released request: status %d", st)
	}
	after := waitingLine("11 waiting", "11")
	if after["detail"] != "· 11 queued · weight 1" || after["queued"] != "11" {
		t.Errorf("the waiting line after one answer: %v", after)
	}
	// The request admitted from the queue waited: the p99s change, still live.
	changed := value(t, tab, "p99 after a queued request was admitted", chromedp.Poll[map[string]string](`(() => {
		const txt = el => el ? el.textContent.replace(/\s+/g, " ").trim() : "";
		const b = `+block+`;
		const s = {p99: txt(document.querySelector('[data-testid="sum-p99-value"]')), connP99: txt(b.querySelector('[data-testid="wait-p99"]'))};
		return window.notReloaded && s.p99 !== `+jsString(before["p99"])+` && s.connP99 !== `+jsString(before["connP99"])+` ? s : false;
	})()`))
	if changed["p99"] == "" || changed["connP99"] == "" {
		t.Errorf("p99 after the queued request was admitted: %v (before %v)", changed, before)
	}
	// The waits and their windows fit the page: it is no wider than the window.
	if w := value(t, tab, "page width", chromedp.Evaluate[[]float64](`[document.documentElement.scrollWidth, innerWidth]`)); w[0] > w[1] {
		t.Errorf("the overview is %v px wide in a %v px window", w[0], w[1])
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// chatStatus sends one chat completion with secret and model and returns the
// status, or 0 when the request failed; unlike trafficDash.chat it may run on
// any goroutine, and outlives the test's context (the test's cleanup waits for it).
func chatStatus(base, secret, model string) int {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	_ = res.Body.Close()
	return res.StatusCode
}
