package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestErrorSummaryInBrowser: after a failed save the focus is on the error summary,
// and the number of problems it states is the number of items it lists (two bad
// lines of one textarea are two problems, two items).
func TestErrorSummaryInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.createConnection(t, "zai-main", `{}`)
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	run(t, tab, "open edit", chromedp.Navigate(d.srv.URL+"/connections/"+c.ID))
	typeInto(t, tab, "modelConcurrency", "glm-5=0\nglm-4.7=x")
	typeInto(t, tab, "maxConcurrent", "-1")
	if status := submit(t, tab, tid("save")); status != http.StatusUnprocessableEntity {
		t.Fatalf("save: status %d, want 422", status)
	}
	got := value(t, tab, "summary", chromedp.Poll[map[string]string](`(() => {
		const s = document.querySelector('[data-testid="error-summary"]');
		if (!s || document.activeElement !== s) return false;
		return {count: s.querySelector('[data-testid="error-count"]').textContent,
			items: String(s.querySelectorAll('[data-testid="error-item"]').length),
			links: String(s.querySelectorAll('[data-testid="error-item"] a[href^="#f-"]').length)};
	})()`))
	n, err := strconv.Atoi(strings.Fields(got["count"])[0])
	if err != nil || n < 3 || strconv.Itoa(n) != got["items"] || got["links"] != got["items"] {
		t.Errorf("summary says %q and lists %s items (%s linked), want the same number, at least 3", got["count"], got["items"], got["links"])
	}
}

// TestLiveLabelsInBrowser: a connection with requests in flight below its cap is
// "in use", not "idle"; after signing out in another tab the overview says the
// session ended (the server answered 401), not that the server did not answer.
func TestLiveLabelsInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	c := d.createConnection(t, "zai-main", `{"maxConcurrent":4}`)
	d.gates.set(live.Snapshot{Gates: []live.Gate{withLoad(connGate(c.ID), live.Gate{Cap: 4, InFlight: 3})}})
	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	run(t, tab, "open overview", chromedp.Navigate(d.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(tid("overview"))))
	row := tid("gate-" + connGate(c.ID).Key)
	if got := value(t, tab, "state at 3 / 4", chromedp.Text(chromedp.CSS(row+" "+tid("state")))); !strings.Contains(got, "in use") {
		t.Errorf("state at 3 / 4 = %q, want in use", got)
	}
	d.gates.set(live.Snapshot{Gates: []live.Gate{withLoad(connGate(c.ID), live.Gate{Cap: 4})}})
	if got := value(t, tab, "state at 0 / 4", chromedp.Poll[string](`(() => {
		const s = document.querySelector('`+row+` [data-testid="state"]').textContent.trim();
		return s.includes("idle") ? s : false;
	})()`)); !strings.Contains(got, "idle") {
		t.Errorf("state at 0 / 4 = %q, want idle", got)
	}

	other := newTab(t, tab) // same browser, same session cookie
	run(t, other, "open the sign-out page", chromedp.Navigate(d.srv.URL+"/logout"))
	if status := submit(t, other, tid("logout")); status != http.StatusOK {
		t.Fatalf("sign out: status %d", status)
	}
	got := value(t, tab, "live status", chromedp.Poll[string](`(() => {
		const s = document.querySelector('[data-live-status]');
		return s && !s.hidden ? s.getAttribute("data-why") + ": " + s.textContent : false;
	})()`))
	if !strings.HasPrefix(got, "signed-out: ") || !strings.Contains(got, "session ended") || !strings.Contains(got, "401") ||
		strings.Contains(got, "did not answer") {
		t.Errorf("after sign-out elsewhere the overview says %q, want the session ended (401)", got)
	}
}
