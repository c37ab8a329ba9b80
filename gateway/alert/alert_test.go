package alert_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/gatehouse-dev/gatehouse/gateway/alert"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// receiver is a webhook receiver that answers each call with the next of
// codes (200 once they run out) and records what it got.
type receiver struct {
	mu      sync.Mutex
	codes   []int
	got     []received
	srv     *httptest.Server
	arrived chan struct{}
}

type received struct {
	body    []byte
	ts, sig string
	status  int
}

func newReceiver(t *testing.T, codes ...int) *receiver {
	t.Helper()
	r := &receiver{codes: codes, arrived: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		code := http.StatusOK
		if len(r.codes) > 0 {
			code, r.codes = r.codes[0], r.codes[1:]
		}
		r.got = append(r.got, received{body: b, ts: req.Header.Get(alert.HeaderTimestamp), sig: req.Header.Get(alert.HeaderSignature), status: code})
		r.mu.Unlock()
		w.WriteHeader(code)
		r.arrived <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) wait(t *testing.T, n int) []received {
	t.Helper()
	for range n {
		select {
		case <-r.arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("the receiver got %d calls, want %d", len(r.all()), n)
		}
	}
	return r.all()
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// fakeSleep records the backoff waits and returns at once.
type fakeSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	f.mu.Lock()
	f.waits = append(f.waits, d)
	f.mu.Unlock()
	return ctx.Err()
}

func hooks(url string, events ...string) limits.AlertWebhooks {
	return limits.AlertWebhooks{{Name: "ops", URL: url, Format: "json", Events: events, SecretSealed: "sealed"}}
}

func open(string) (string, error) { return "s3cret", nil }

func waitStatus(t *testing.T, n *alert.Notifier, status string) alert.Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ds, _ := n.Recent(t.Context(), 10)
		if len(ds) > 0 && ds[0].Status == status {
			return ds[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	ds, _ := n.Recent(t.Context(), 10)
	t.Fatalf("deliveries = %+v, want the newest %s", ds, status)
	return alert.Delivery{}
}

func TestSignatureVerifies(t *testing.T) {
	r := newReceiver(t)
	n := alert.New(t.Context(), alert.Options{Open: open, DashboardURL: "https://gh.example"})
	defer n.Close()
	n.Configure(hooks(r.srv.URL, limits.AlertSessionGuard), 0)
	n.Emit(alert.Event{Name: limits.AlertSessionGuard, Subject: "s1", Condition: "looping", Severity: alert.SeverityWarning,
		Summary: "session s1 is looping", Path: "/sessions"})
	got := r.wait(t, 1)[0]
	// As documented for receivers, computed here apart from the package:
	// sha256=hex(HMAC-SHA256(secret, timestamp + "." + body)), the
	// timestamp in Unix seconds.
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write([]byte(got.ts + "."))
	m.Write(got.body)
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); got.sig != want {
		t.Fatalf("X-Gatehouse-Signature = %q, want %q (HMAC-SHA256 of timestamp.body)", got.sig, want)
	}
	if ts, err := strconv.ParseInt(got.ts, 10, 64); err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Hour {
		t.Errorf("X-Gatehouse-Timestamp = %q, want Unix seconds of the send", got.ts)
	}
	if !alert.Verify("s3cret", got.ts, got.sig, got.body) {
		t.Fatalf("signature %q over timestamp %q does not verify", got.sig, got.ts)
	}
	if alert.Verify("other", got.ts, got.sig, got.body) {
		t.Fatal("signature verifies under another secret")
	}
	var body map[string]any
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"event", "subject", "severity", "summary", "details", "at", "dashboardUrl"} {
		if _, ok := body[k]; !ok {
			t.Errorf("body lacks %q: %s", k, got.body)
		}
	}
	if body["dashboardUrl"] != "https://gh.example/sessions" || body["event"] != "session.guard" {
		t.Errorf("body = %s", got.body)
	}
}

func TestRetriesWithBackoff(t *testing.T) {
	r := newReceiver(t, 500, 500, 500)
	fs := &fakeSleep{}
	n := alert.New(t.Context(), alert.Options{Sleep: fs.sleep})
	defer n.Close()
	n.Configure(hooks(r.srv.URL, limits.AlertClusterDegraded), 0)
	n.Emit(alert.Event{Name: limits.AlertClusterDegraded, Subject: "redis", Summary: "Redis away"})
	got := r.wait(t, 4)
	if got[3].status != 200 {
		t.Fatalf("fourth try answered %d", got[3].status)
	}
	d := waitStatus(t, n, alert.StatusDelivered)
	if d.Tries != 4 {
		t.Errorf("tries = %d, want 4", d.Tries)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, fs.waits); diff != "" {
		t.Errorf("backoff mismatch (-want +got):\n%s", diff)
	}
}

func TestGivesUpAfterAnHour(t *testing.T) {
	codes := make([]int, 20)
	for i := range codes {
		codes[i] = 503
	}
	r := newReceiver(t, codes...)
	fs := &fakeSleep{}
	n := alert.New(t.Context(), alert.Options{Sleep: fs.sleep})
	defer n.Close()
	n.Configure(hooks(r.srv.URL, limits.AlertClusterDegraded), 0)
	n.Emit(alert.Event{Name: limits.AlertClusterDegraded, Subject: "redis"})
	d := waitStatus(t, n, alert.StatusFailed)
	// 1 s doubling: 1, 2, … 2048 s are waited; 4096 s would pass 1 h.
	if d.Tries != 13 || d.LastError != "webhook answered 503" {
		t.Errorf("delivery = %+v, want 13 tries, the last answered 503", d)
	}
	if len(r.all()) != 13 {
		t.Errorf("receiver got %d calls, want 13", len(r.all()))
	}
}

func TestCooldownPerCondition(t *testing.T) {
	r := newReceiver(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	n := alert.New(t.Context(), alert.Options{Now: clock})
	defer n.Close()
	n.Configure(hooks(r.srv.URL, limits.AlertBudgetThreshold), 60000)
	emit := func(cond string) {
		n.Emit(alert.Event{Name: limits.AlertBudgetThreshold, Subject: "k1", Condition: cond})
	}
	emit("daily 80%")
	emit("daily 100%")
	for range 50 {
		emit("daily 80%")
		emit("daily 100%")
	}
	r.wait(t, 2)
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	emit("daily 100%") // the cooldown has passed
	r.wait(t, 1)
	if got := len(r.all()); got != 3 {
		t.Fatalf("receiver got %d alerts, want 3", got)
	}
}

func TestEmitNeverWaitsForTheReceiver(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	n := alert.New(t.Context(), alert.Options{Queue: 4})
	defer n.Close()
	n.Configure(hooks(srv.URL, limits.AlertSessionGuard), 0)
	// More distinct events than the queue holds: Emit returns for each (the
	// surplus is dropped and counted), though the receiver never answers.
	for i := range 100 {
		n.Emit(alert.Event{Name: limits.AlertSessionGuard, Subject: "s" + string(rune('A'+i))})
	}
}

// TestDeniedWebhookNeverDialled: a stored webhook whose address the deny
// list holds (the list changed after the save, or the name now resolves
// there) is refused at dial time: the event's deliveries and a test alert
// are given up at the first try (a denied address is not retried) with the
// refusal, and the receiver never gets a call.
func TestDeniedWebhookNeverDialled(t *testing.T) {
	r := newReceiver(t)
	deny, err := outbound.ParseDeny("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	byName := strings.Replace(r.srv.URL, "127.0.0.1", "localhost", 1)
	n := alert.New(t.Context(), alert.Options{Deny: deny, Sleep: (&fakeSleep{}).sleep})
	defer n.Close()
	n.Configure(limits.AlertWebhooks{{Name: "ip", URL: r.srv.URL, Format: "json", Events: []string{limits.AlertClusterDegraded}},
		{Name: "name", URL: byName, Format: "slack", Events: []string{limits.AlertClusterDegraded}}}, 0)
	n.Emit(alert.Event{Name: limits.AlertClusterDegraded, Subject: "redis"})
	if _, err := n.Test(t.Context(), "ip", "admin"); err != nil {
		t.Fatal(err)
	}
	var ds []alert.Delivery
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ds, _ = n.Recent(t.Context(), 10)
		failed := 0
		for _, d := range ds {
			if d.Status == alert.StatusFailed {
				failed++
			}
		}
		if failed == 3 {
			break
		}
	}
	if len(ds) != 3 {
		t.Fatalf("deliveries = %+v, want 3 (the event to both webhooks, the test)", ds)
	}
	for _, d := range ds {
		if d.Status != alert.StatusFailed || d.Tries != 1 || !strings.Contains(d.LastError, "on the upstream deny list") {
			t.Errorf("delivery %s to %s = %s after %d tries (%q), want given up at once as denied", d.Event, d.Webhook, d.Status, d.Tries, d.LastError)
		}
	}
	if got := r.all(); len(got) != 0 {
		t.Errorf("the denied receiver got %d calls", len(got))
	}
}
