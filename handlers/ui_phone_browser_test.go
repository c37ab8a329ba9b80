package handlers

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// phoneWidth is the viewport of the phone layouts: every page fits it.
const phoneWidth = 390

// TestPhoneLayoutsInBrowser: at a 390 px viewport the overview, /connections and
// /keys are no wider than the screen (the document's scrollWidth) and their live
// numbers — in flight and queued — are on screen without scrolling sideways.
func TestPhoneLayoutsInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.createConnection(t, "zai-main-with-a-long-name", `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3}}`)
	k := d.createKey(t, "team-with-a-long-name", `{"maxConcurrent":8,"rpm":600,"tpm":1000000,"tpd":50000000,"models":["zai/*","glm-5","glm-4.7"]}`)
	d.gates.set(live.Snapshot{
		Gates: []live.Gate{
			withLoad(connGate(c.ID), live.Gate{Cap: 4, InFlight: 3, Queued: 2}),
			withLoad(modelGate(c.ID, "glm-5"), live.Gate{Cap: 1, InFlight: 1, Queued: 6}),
		},
		Clients: []live.Client{{ID: k.ID, Name: k.Name, Cap: 8, InFlight: 8, Queued: 5}},
	})
	tab := newBrowser(t)
	run(t, tab, "phone viewport", chromedp.EmulateViewport(phoneWidth, 844))
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	for _, tc := range []struct{ path, live string }{
		{"/", `[data-testid="ratio"], [data-testid="queued"], [data-testid="sum-errors"]`},
		{"/connections", `[data-live-conn]`},
		{"/keys", `[data-live-client]`},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			run(t, tab, "open "+tc.path, chromedp.Navigate(d.srv.URL+tc.path), chromedp.WaitReady(chromedp.CSS("main")))
			got := value(t, tab, "measure", chromedp.Evaluate[map[string]any](`(() => {
				const cells = [...document.querySelectorAll('`+tc.live+`')];
				const off = cells.filter(e => { const r = e.getBoundingClientRect(); return r.width === 0 || r.left < 0 || r.right > innerWidth; })
					.map(e => (e.dataset.liveConn || e.dataset.liveClient || e.dataset.testid) + "@" + Math.round(e.getBoundingClientRect().right));
				return {width: document.documentElement.scrollWidth, viewport: innerWidth, cells: cells.length, off: off};
			})()`))
			if w := got["width"].(float64); w > phoneWidth || got["viewport"].(float64) != phoneWidth {
				t.Errorf("%s is %v px wide at a %v px viewport, want ≤ %d", tc.path, w, got["viewport"], phoneWidth)
			}
			if n := got["cells"].(float64); n < 2 {
				t.Errorf("%s: %v live cells found, want the live columns", tc.path, n)
			}
			if off := got["off"].([]any); len(off) > 0 {
				t.Errorf("%s: live cells off screen: %v", tc.path, off)
			}
		})
	}
}
