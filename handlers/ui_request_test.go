package handlers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/store"
)

// logRequests writes a small request log: team-a served (cost $0.006) and refused
// at its key gate, team-b served; returns the rows with their ids.
func (d *dash) logRequests(t *testing.T) []store.RequestRow {
	t.Helper()
	a := d.createKey(t, "team-a", `{}`)
	b := d.createKey(t, "team-b", `{}`)
	conn := "6f1c0000-0000-4000-8000-0000000000c1"
	now := time.Now().UTC()
	rows := []store.RequestRow{
		{StartedAt: now.Add(-3 * time.Minute), KeyID: a.ID, KeyName: "team-a", ConnectionID: conn, ConnectionName: "zai-main",
			Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, TTFTMs: 12,
			TotalMs: 40, InputTokens: 1000, OutputTokens: 500, CostMicros: 6000, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"},
		{StartedAt: now.Add(-2 * time.Minute), KeyID: a.ID, KeyName: "team-a", Model: "glm-5", Route: "chat", Status: 429,
			Code: "SEMAPHORE_TIMEOUT", Gate: "key:" + a.ID, QueueMs: 200, TTFTMs: -1, TotalMs: 201},
		{StartedAt: now.Add(-time.Minute), KeyID: b.ID, KeyName: "team-b", ConnectionID: conn, ConnectionName: "zai-main",
			Provider: "zai", Model: "glm-5", UpstreamModel: "glm-5", Route: "chat", Status: 200, Attempts: 1, TTFTMs: 9,
			InputTokens: 10, OutputTokens: 5, CostMicros: 60},
	}
	if err := d.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	return rows
}

// TestRequestsPages renders /requests (filters, bad filters), /requests/{id},
// /usage and the CSV downloads for a viewer, without a browser.
func TestRequestsPages(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	rows := d.logRequests(t)
	c := d.signIn(t, "viewer@example.com")

	all := d.get(t, c, "/requests").want(t, http.StatusOK)
	if got := all.testid("request-row").Length(); got != 3 {
		t.Fatalf("rows = %d, want 3", got)
	}
	filtered := d.get(t, c, "/requests?key="+rows[1].KeyID+"&status=429").want(t, http.StatusOK)
	if diff := cmp.Diff([]string{"429"}, texts(filtered.testid("request-status"))); diff != "" {
		t.Errorf("filtered statuses mismatch (-want +got):\n%s", diff)
	}
	bad := d.get(t, c, "/requests?status=teapot&since=yesterday").want(t, http.StatusUnprocessableEntity)
	if got := bad.body; !strings.Contains(got, "must be an HTTP status from 100 to 599") || !strings.Contains(got, "must be a time such as") {
		t.Errorf("bad filters page does not word both errors:\n%s", got)
	}

	one := d.get(t, c, "/requests/"+rows[1].ID).want(t, http.StatusOK)
	if got := strings.TrimSpace(one.testid("code-explained").Text()); !strings.Contains(got, "waited for a free slot") || !strings.Contains(got, "key:"+rows[1].KeyID) {
		t.Errorf("code explained %q: want the words and the gate", got)
	}
	served := d.get(t, c, "/requests/"+rows[0].ID).want(t, http.StatusOK)
	if got := strings.TrimSpace(served.testid("request-cost").Text()); !strings.HasPrefix(got, "$0.006") {
		t.Errorf("served request's cost %q, want $0.006", got)
	}
	d.get(t, c, "/requests/"+"01890000-0000-7000-8000-000000000000").want(t, http.StatusNotFound)

	usage := d.get(t, c, "/usage").want(t, http.StatusOK)
	for _, id := range []string{"chart-requests", "chart-tokens", "chart-spend", "chart-models"} {
		ch := usage.testid(id)
		if ch.Length() != 1 || ch.Find(`[data-testid="chart-svg"] title`).Length() == 0 || ch.Find(`desc`).Length() == 0 ||
			ch.Find(`[data-testid="chart-bar"]`).Length() == 0 || ch.Find(`[data-testid="chart-legend"] li`).Length() == 0 {
			t.Errorf("%s: want an SVG with a title, a description, bars and a legend", id)
		}
	}
	csv := d.get(t, c, "/usage.csv?range=24h&chart=spend").want(t, http.StatusOK)
	if !strings.HasPrefix(csv.body, "label,team-a (USD),team-b (USD)\n") || !strings.Contains(csv.body, ",0.006,") {
		t.Errorf("spend CSV:\n%s", csv.body)
	}
	reqCSV := d.get(t, c, "/requests.csv?key=team-b").want(t, http.StatusOK)
	if lines := strings.Split(strings.TrimSpace(reqCSV.body), "\n"); len(lines) != 2 || !strings.Contains(lines[1], "team-b") {
		t.Errorf("requests CSV for team-b:\n%s", reqCSV.body)
	}
	d.get(t, c, "/usage.csv?chart=nope").want(t, http.StatusNotFound)
}

// TestRequestsInBrowser: a real Chromium signs in, opens /requests, filters by key
// and status, opens the row, opens /usage, finds the charts and downloads a CSV.
func TestRequestsInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	rows := d.logRequests(t)
	base := d.srv.URL
	tab := newBrowser(t)
	browserSignIn(t, tab, base, "viewer@example.com")

	run(t, tab, "open requests", chromedp.Navigate(base+"/requests"), chromedp.WaitVisible(chromedp.CSS(tid("request-table"))))
	if n := value(t, tab, "rows", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="request-row"]').length`)); n != 3 {
		t.Fatalf("rows = %d, want 3", n)
	}
	run(t, tab, "filter by key", chromedp.SetValue(chromedp.CSS(tid("filter-key")), rows[1].KeyID))
	run(t, tab, "filter by status", chromedp.SendKeys(chromedp.CSS(tid("filter-status")), "429"))
	if status := submit(t, tab, tid("filter-apply")); status != http.StatusOK {
		t.Fatalf("filter: status %d", status)
	}
	got := value(t, tab, "filtered rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="request-status"]')].map(e => e.textContent.trim())`))
	if diff := cmp.Diff([]string{"429"}, got); diff != "" {
		t.Fatalf("filtered statuses mismatch (-want +got):\n%s", diff)
	}
	if status := submit(t, tab, tid("request-link")); status != http.StatusOK {
		t.Fatalf("open the row: status %d", status)
	}
	if loc := value(t, tab, "location", chromedp.Location()); loc != base+"/requests/"+rows[1].ID {
		t.Fatalf("the row led to %q", loc)
	}
	if txt := value(t, tab, "code explained", chromedp.Text(chromedp.CSS(tid("code-explained")))); !strings.Contains(txt, "SEMAPHORE_TIMEOUT") {
		t.Errorf("code explained %q", txt)
	}

	run(t, tab, "open usage", chromedp.Navigate(base+"/usage"), chromedp.WaitVisible(chromedp.CSS(tid("chart-requests"))))
	charts := value(t, tab, "charts", chromedp.Evaluate[[]string](`[...document.querySelectorAll('figure.chart')].filter(f => f.querySelector('svg[role="img"] title') && f.querySelector('[data-testid="chart-bar"]')).map(f => f.dataset.testid)`))
	if diff := cmp.Diff([]string{"chart-requests", "chart-tokens", "chart-spend", "chart-models"}, charts); diff != "" {
		t.Errorf("charts drawn mismatch (-want +got):\n%s", diff)
	}
	csv := value(t, tab, "download CSV", chromedp.Evaluate[string](`fetch(document.querySelector('[data-testid="csv-requests"]').href).then(async r => r.headers.get("Content-Disposition") + "\n" + await r.text())`, chromedp.EvalAwaitPromise))
	if !strings.HasPrefix(csv, "attachment; filename=\"usage-requests-24h.csv\"\nlabel,served (requests),failed (requests),refused by Gatehouse (requests)\n") {
		t.Errorf("CSV download: %q", csv)
	}
}

// TestRequestsSessionFilter: /requests?session= shows the session's requests
// only, a request's page links its session and says how it used its
// affinity binding, and a malformed session is refused with its field named.
func TestRequestsSessionFilter(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	k := d.createKey(t, "agents", `{}`)
	now := time.Now().UTC()
	const sess = "0123456789abcdef"
	rows := []store.RequestRow{
		{StartedAt: now.Add(-3 * time.Minute), KeyID: k.ID, KeyName: "agents", Model: "claude", Route: "messages", Status: 200, TTFTMs: -1, Session: sess, Affinity: "bound"},
		{StartedAt: now.Add(-2 * time.Minute), KeyID: k.ID, KeyName: "agents", Model: "claude", Route: "messages", Status: 200, TTFTMs: -1, Session: sess, Affinity: "hit"},
		{StartedAt: now.Add(-time.Minute), KeyID: k.ID, KeyName: "agents", Model: "claude", Route: "messages", Status: 200, TTFTMs: -1},
	}
	if err := d.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatalf("WriteRequests: %v", err)
	}
	c := d.signIn(t, "viewer@example.com")
	page := d.get(t, c, "/requests?session="+sess).want(t, http.StatusOK)
	if got := page.testid("request-row").Length(); got != 2 {
		t.Errorf("rows of the session = %d, want 2", got)
	}
	one := d.get(t, c, "/requests/"+rows[1].ID).want(t, http.StatusOK)
	if href, _ := one.testid("request-session").Attr("href"); href != "/requests?session="+sess {
		t.Errorf("session link %q", href)
	}
	if got := strings.TrimSpace(one.testid("request-affinity").Text()); got != "followed its binding" {
		t.Errorf("affinity reads %q", got)
	}
	bad := d.get(t, c, "/requests?session=nope").want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(bad.body, "16 hex digits") {
		t.Errorf("a malformed session is not refused in words:\n%s", bad.body)
	}
}
