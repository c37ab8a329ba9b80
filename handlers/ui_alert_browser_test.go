package handlers

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/store"
)

// notifierAlerts is the wiring of cmd/gatehouse in small: a real notifier
// whose deliveries are rows of the store, as the AlertSource.
type notifierAlerts struct {
	n  *alert.Notifier
	st *store.Store
}

func (a *notifierAlerts) Claim(ctx context.Context, d alert.Delivery, cooldown time.Duration) (alert.Delivery, bool, error) {
	got, ok, err := a.st.ClaimAlert(ctx, store.AlertDelivery(d), cooldown)
	return alert.Delivery(got), ok, err
}

func (a *notifierAlerts) Update(ctx context.Context, id int64, status string, tries int, lastError string, at time.Time) error {
	return a.st.UpdateAlert(ctx, id, status, tries, lastError, at)
}

func (a *notifierAlerts) RecentDeliveries(ctx context.Context, limit int) ([]alert.Delivery, error) {
	ds, err := a.st.RecentAlerts(ctx, limit)
	out := make([]alert.Delivery, len(ds))
	for i, d := range ds {
		out[i] = alert.Delivery(d)
	}
	return out, err
}

func (a *notifierAlerts) RecentAlerts(ctx context.Context, limit int) ([]store.AlertDelivery, error) {
	return a.st.RecentAlerts(ctx, limit)
}

func (a *notifierAlerts) TestAlert(ctx context.Context, webhook, actor string) (store.AlertDelivery, error) {
	d, err := a.n.Test(ctx, webhook, actor)
	return store.AlertDelivery(d), err
}

func (a *notifierAlerts) IsNoWebhook(err error) bool { return err == alert.ErrNoWebhook }

// TestAlertsSendTestInBrowser: a real Chromium on /alerts. The admin sees
// the webhook (signed, no secret) and clicks its Send test; the local
// page shows the delivery sending while the receiver holds it; once the
// receiver answers, the page shows it delivered without a reload, and the
// alert it got verifies with the webhook's secret. A viewer sees the
// page but no button, and is refused 403 on the POST.
func TestAlertsSendTestInBrowser(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // the receiver answers once the page has shown the delivery sending
		case <-release:
		case <-r.Context().Done():
		}
		b, _ := io.ReadAll(r.Body)
		if !alert.Verify("browser-secret", r.Header.Get(alert.HeaderTimestamp), r.Header.Get(alert.HeaderSignature), b) {
			t.Errorf("the test alert's signature does not verify")
		}
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
	}))
	defer recv.Close()
	src := &notifierAlerts{}
	d := newDashWith(t, func(deps *Deps) { deps.Alerts = src })
	src.st = d.store
	src.n = alert.New(t.Context(), alert.Options{Claims: src, Open: d.store.OpenAlertSecret, DashboardURL: d.srv.URL})
	t.Cleanup(src.n.Close)
	hooks := limits.AlertWebhooks{{Name: "ops-room", URL: recv.URL + "/hook", Format: "json",
		Events: []string{limits.AlertBudgetThreshold}, SecretSealed: d.store.SealAlertSecret("browser-secret")}}
	data, err := json.Marshal(map[string]any{"alerts": hooks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.store.UpdateSettings(t.Context(), "test", 0, func(store.Settings) (json.RawMessage, error) { return data, nil }); err != nil {
		t.Fatal(err)
	}
	src.n.Configure(hooks, 0)

	tab := newBrowser(t)
	browserSignIn(t, tab, d.srv.URL, "admin@example.com")
	hook := `[data-testid="alert-webhook"][data-webhook="ops-room"]`
	run(t, tab, "open /alerts", chromedp.Navigate(d.srv.URL+"/alerts"), chromedp.WaitVisible(chromedp.CSS(hook)))
	cells := value(t, tab, "read the webhook", chromedp.Evaluate[[]string](`[...document.querySelectorAll('`+hook+` td')].map(td => td.textContent.trim())`))
	if len(cells) < 5 || cells[0] != "ops-room" || cells[4] != "yes" {
		t.Errorf("webhook row = %q, want ops-room, signed", cells)
	}
	if status := submit(t, tab, hook+` [data-testid="alert-test"]`); status != http.StatusOK {
		t.Fatalf("Send test: status %d", status)
	}
	run(t, tab, "the delivery shows sending", chromedp.WaitVisible(chromedp.CSS(`[data-testid="alert-row"][data-event="test"][data-status="sending"]`)))
	run(t, tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	releaseOnce.Do(func() { close(release) })
	run(t, tab, "the delivery shows delivered, live",
		chromedp.Poll[chromedp.Void](`window.notReloaded && document.querySelector('[data-testid="alert-row"][data-event="test"][data-webhook="ops-room"][data-status="delivered"]') !== null`))
	mu.Lock()
	if len(got) != 1 || !strings.Contains(got[0], `"event":"test"`) || !strings.Contains(got[0], "admin@example.com") {
		t.Errorf("the receiver got %q, want one test alert sent by the admin", got)
	}
	mu.Unlock()

	viewerTab := newBrowser(t)
	browserSignIn(t, viewerTab, d.srv.URL, "viewer@example.com")
	run(t, viewerTab, "open /alerts as a viewer", chromedp.Navigate(d.srv.URL+"/alerts"), chromedp.WaitVisible(chromedp.CSS(hook)))
	if n := value(t, viewerTab, "count buttons", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="alert-test"]').length`)); n != 0 {
		t.Errorf("a viewer sees %d Send test buttons, want 0", n)
	}
	d.post(t, d.signIn(t, "viewer@example.com"), "/alerts/ops-room/test", nil).want(t, http.StatusForbidden)
}
