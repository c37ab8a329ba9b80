package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
)

// chromiumPath is Debian's Chromium; scripts/test installs it in CI.
const chromiumPath = "/usr/bin/chromium"

// browserStep bounds one browser action, so a hung page fails the test instead of
// the whole run.
const browserStep = 20 * time.Second

// newBrowser starts one headless Chromium for the test and returns the context of
// its first tab. The browser is closed (and waited for) when the test ends.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s: %v — install chromium (scripts/test does it as root)", chromiumPath, err)
	}
	allocCtx, allocCancel := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(allocCancel)
	ctx, cancel := chromedp.NewContext(allocCtx, cspWatch(t))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, with no deadline
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// newTab opens another tab in the browser of parent, closed when the test ends. Its
// first action runs without a deadline: the first Run binds the tab's life to its
// context.
func newTab(t *testing.T, parent context.Context, opts ...chromedp.ContextOption) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(parent, append(opts, cspWatch(t))...)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open tab: %v", err)
	}
	return ctx
}

// cspWatch makes a tab report every Content Security Policy violation its pages log
// (an inline style or script the dashboard's CSP refuses): the test fails with them
// when it ends.
func cspWatch(t *testing.T) chromedp.ContextOption {
	var (
		mu   sync.Mutex
		seen []string
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range seen {
			t.Errorf("the browser logged a CSP violation: %s", m)
		}
	})
	return chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*cdplog.EventEntryAdded); ok && strings.Contains(e.Entry.Text, "Content Security Policy") {
			mu.Lock()
			seen = append(seen, e.Entry.URL+": "+e.Entry.Text)
			mu.Unlock()
		}
	})
}

// front makes a tab the active one: a hidden tab gets no animation frames, and
// actions that wait for visibility would wait for ever.
func front(ctx context.Context) error {
	_, err := chromedp.Call(ctx, cdppage.BringToFront, cdp.Empty{})
	return err
}

// run runs actions on a tab within browserStep.
func run(t *testing.T, tab context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserStep)
	defer cancel()
	if err := front(ctx); err != nil {
		t.Fatalf("%s: bring tab to front: %v", what, err)
	}
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one action that returns a value, within browserStep.
func value[T any](t *testing.T, tab context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserStep)
	defer cancel()
	if err := front(ctx); err != nil {
		t.Fatalf("%s: bring tab to front: %v", what, err)
	}
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// submit clicks sel and returns the HTTP status of the page it leads to (after
// redirects, the final page's).
func submit(t *testing.T, tab context.Context, sel string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, browserStep)
	defer cancel()
	if err := front(ctx); err != nil {
		t.Fatalf("click %s: bring tab to front: %v", sel, err)
	}
	res, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
	return res.Status
}

func tid(id string) string { return `[data-testid="` + id + `"]` }

// typeInto replaces the text of a field by typing.
func typeInto(t *testing.T, tab context.Context, field, text string) {
	t.Helper()
	sel, _ := json.Marshal(tid("field-" + field))
	run(t, tab, "type into "+field,
		chromedp.WaitVisible(chromedp.CSS(tid("field-"+field))),
		chromedp.Evaluate[chromedp.Void](`document.querySelector(`+string(sel)+`).value = ""`),
		chromedp.SendKeys(chromedp.CSS(tid("field-"+field)), text),
	)
}

// browserSignIn signs a tab in through the sign-in form.
func browserSignIn(t *testing.T, tab context.Context, base, email string) {
	t.Helper()
	run(t, tab, "open sign-in", chromedp.Navigate(base+"/login"))
	typeInto(t, tab, "email", email)
	typeInto(t, tab, "password", dashPassword)
	if status := submit(t, tab, tid("login-submit")); status != http.StatusOK {
		t.Fatalf("sign in as %s: status %d", email, status)
	}
}

func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	base := d.srv.URL
	tab := newBrowser(t)
	shots, err := os.MkdirTemp("", "gatehouse-screens-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	fmt.Println("dashboard screenshots:", shots)

	browserSignIn(t, tab, base, "admin@example.com")

	// Create a connection through the form.
	run(t, tab, "open new connection", chromedp.Navigate(base+"/connections/new"))
	typeInto(t, tab, "name", "zai-main")
	typeInto(t, tab, "provider", "zai")
	typeInto(t, tab, "baseUrl", "https://api.z.ai/api/paas/v4")
	typeInto(t, tab, "apiKey", "sk-browser-9f2c")
	typeInto(t, tab, "models", "glm-5\nglm-4.7")
	if status := submit(t, tab, tid("save")); status != http.StatusOK {
		t.Fatalf("create: status %d", status)
	}
	loc := value(t, tab, "location", chromedp.Location())
	id := strings.TrimPrefix(loc, base+"/connections/")
	conn, err := d.store.GetConnection(t.Context(), id)
	if err != nil {
		t.Fatalf("created connection %q: %v", id, err)
	}
	editURL := base + "/connections/" + id

	t.Run("per-model caps round trip", func(t *testing.T) {
		typeInto(t, tab, "modelConcurrency", "glm-5=1\nglm-4.7=3")
		if status := submit(t, tab, tid("save")); status != http.StatusOK {
			t.Fatalf("save: status %d", status)
		}
		run(t, tab, "reload", chromedp.Navigate(editURL))
		got := value(t, tab, "caps textarea", chromedp.Value(chromedp.CSS(tid("field-modelConcurrency"))))
		if got != "glm-4.7=3\nglm-5=1" {
			t.Errorf("textarea after reload %q, want %q", got, "glm-4.7=3\nglm-5=1")
		}
		want := map[string]any{"modelConcurrency": map[string]any{"glm-5": 1.0, "glm-4.7": 3.0}}
		if diff := cmp.Diff(want, d.overrides(t, id)); diff != "" {
			t.Errorf("stored overrides mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("bad cap shows its line and saves nothing", func(t *testing.T) {
		before, _ := d.store.GetConnection(t.Context(), id)
		run(t, tab, "open edit", chromedp.Navigate(editURL))
		typeInto(t, tab, "modelConcurrency", "glm-5=0")
		if status := submit(t, tab, tid("save")); status != http.StatusUnprocessableEntity {
			t.Fatalf("save: status %d, want 422", status)
		}
		msg := value(t, tab, "error text", chromedp.Text(chromedp.CSS(tid("error-modelConcurrency"))))
		if want := `line 1: "glm-5=0": cap must be a whole number from 1 to 10000`; strings.TrimSpace(msg) != want {
			t.Errorf("error beside the textarea %q, want %q", msg, want)
		}
		after, _ := d.store.GetConnection(t.Context(), id)
		if after.Version != before.Version {
			t.Errorf("version %d → %d: a bad form saved", before.Version, after.Version)
		}
		shot := value(t, tab, "screenshot", chromedp.FullScreenshot(100))
		writeShot(t, shots, "edit-error.png", shot)
	})

	t.Run("API-set key survives a rename", func(t *testing.T) {
		if _, err := d.store.UpdateConnection(t.Context(), "token:ci", id, 0, func(cur store.Connection) (store.ConnectionInput, error) {
			var o map[string]any
			if err := json.Unmarshal(cur.RateLimitOverrides, &o); err != nil {
				return store.ConnectionInput{}, err
			}
			o["executionMaxWaitMs"] = 300000
			in := cur.Input()
			in.RateLimitOverrides, _ = json.Marshal(o)
			return in, nil
		}); err != nil {
			t.Fatal(err)
		}
		run(t, tab, "open edit", chromedp.Navigate(editURL))
		typeInto(t, tab, "name", "zai-renamed")
		if status := submit(t, tab, tid("save")); status != http.StatusOK {
			t.Fatalf("save: status %d", status)
		}
		got, _ := d.store.GetConnection(t.Context(), id)
		if got.Name != "zai-renamed" {
			t.Errorf("name %q", got.Name)
		}
		want := map[string]any{"executionMaxWaitMs": 300000.0, "modelConcurrency": map[string]any{"glm-5": 1.0, "glm-4.7": 3.0}}
		if diff := cmp.Diff(want, d.overrides(t, id)); diff != "" {
			t.Errorf("stored overrides mismatch (-want +got):\n%s", diff)
		}
		if got.APIKeyPreview != conn.APIKeyPreview {
			t.Errorf("key preview %q → %q: the stored key changed", conn.APIKeyPreview, got.APIKeyPreview)
		}
	})

	t.Run("two tabs: the second save conflicts", func(t *testing.T) {
		tab2 := newTab(t, tab) // a second tab in the same browser
		run(t, tab, "tab 1 open", chromedp.Navigate(editURL))
		run(t, tab2, "tab 2 open", chromedp.Navigate(editURL))
		typeInto(t, tab, "maxConcurrent", "5")
		if status := submit(t, tab, tid("save")); status != http.StatusOK {
			t.Fatalf("tab 1 save: status %d", status)
		}
		typeInto(t, tab2, "maxConcurrent", "7")
		if status := submit(t, tab2, tid("save")); status != http.StatusConflict {
			t.Fatalf("tab 2 save: status %d, want 409", status)
		}
		banner := value(t, tab2, "conflict banner", chromedp.Text(chromedp.CSS(tid("conflict"))))
		if !strings.Contains(banner, "admin@example.com") {
			t.Errorf("conflict banner %q does not say who saved", banner)
		}
		if typed := value(t, tab2, "typed value", chromedp.Value(chromedp.CSS(tid("field-maxConcurrent")))); typed != "7" {
			t.Errorf("tab 2 lost what it typed: %q", typed)
		}
		if got := d.overrides(t, id)["maxConcurrent"]; got != 5.0 {
			t.Errorf("stored maxConcurrent %v, want tab 1's 5", got)
		}
		writeShot(t, shots, "edit-conflict.png", value(t, tab2, "screenshot", chromedp.FullScreenshot(100)))
	})

	t.Run("screenshots", func(t *testing.T) {
		d.gates.set(live.Snapshot{
			Gates: []live.Gate{
				{Key: "global", Level: "global", Cap: 64, InFlight: 5, Queued: 6},
				withLoad(connGate(id), live.Gate{Cap: 5, InFlight: 3, Queued: 6, Admitted: 120, WaitTotal: 48 * time.Second}),
				withLoad(modelGate(id, "glm-5"), live.Gate{Cap: 1, InFlight: 1, Queued: 6, Admitted: 40, WaitTotal: 40 * time.Second, Timeouts: 2}),
				withLoad(modelGate(id, "glm-4.7"), live.Gate{Cap: 3, InFlight: 2, Admitted: 80, WaitTotal: 8 * time.Second}),
			},
			Connections: []live.Connection{{ID: id, Name: "zai-renamed", Health: live.HealthOK}},
		})
		run(t, tab, "open overview", chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.CSS(`[data-gate="`+modelGate(id, "glm-5").Key+`"]`)))
		writeShot(t, shots, "overview.png", value(t, tab, "screenshot", chromedp.FullScreenshot(100)))
		run(t, tab, "open edit", chromedp.Navigate(editURL)) // Advanced is open: executionMaxWaitMs has a value
		writeShot(t, shots, "edit.png", value(t, tab, "screenshot", chromedp.FullScreenshot(100)))
	})

	t.Run("connections list updates live", func(t *testing.T) {
		d.gates.set(live.Snapshot{Gates: []live.Gate{withLoad(connGate(id), live.Gate{Cap: 5, InFlight: 1})}})
		row := `tr[data-conn="` + id + `"]`
		run(t, tab, "open list", chromedp.Navigate(base+"/connections"), chromedp.WaitVisible(chromedp.CSS(row)))
		d.gates.set(live.Snapshot{Gates: []live.Gate{
			withLoad(connGate(id), live.Gate{Cap: 5, InFlight: 4, Queued: 2}),
			withLoad(modelGate(id, "glm-5"), live.Gate{Cap: 1, InFlight: 1, Queued: 3}),
		}})
		// The page polls /live; wait (bounded by browserStep) for the row to show the new load.
		got := value(t, tab, "live load", chromedp.Poll[string](`(() => {
			const r = document.querySelector('`+row+`');
			const s = r.querySelector('[data-live-conn="inflight"]').textContent + " / " +
				r.querySelector('[data-live-conn="queued"]').textContent;
			return s === "4 / 5" ? s : false;
		})()`))
		if got != "4 / 5" {
			t.Errorf("live in flight / queued %q, want 4 / 5", got)
		}
	})

	t.Run("viewer reads only; forged POST refused", func(t *testing.T) {
		vtab := newTab(t, tab, chromedp.WithNewBrowserContext()) // own cookies
		browserSignIn(t, vtab, base, "viewer@example.com")
		run(t, vtab, "open edit", chromedp.Navigate(editURL))
		state := value(t, vtab, "form state", chromedp.Evaluate[map[string]bool](`({
			nameDisabled: document.querySelector('[data-testid="field-name"]').disabled,
			capsDisabled: document.querySelector('[data-testid="field-modelConcurrency"]').disabled,
			noSave: document.querySelector('[data-testid="save"]') === null,
			readOnly: document.querySelector('[data-testid="read-only"]') !== null,
		})`))
		if diff := cmp.Diff(map[string]bool{"nameDisabled": true, "capsDisabled": true, "noSave": true, "readOnly": true}, state); diff != "" {
			t.Errorf("viewer's form mismatch (-want +got):\n%s", diff)
		}
		cur, _ := d.store.GetConnection(t.Context(), id)
		status := value(t, vtab, "forged POST", chromedp.Evaluate[int](`fetch("/connections/`+id+`", {
			method: "POST", body: new URLSearchParams({version: "`+strconv.FormatInt(cur.Version, 10)+`", name: "hijacked"}),
		}).then(r => r.status)`, chromedp.EvalAwaitPromise))
		if status != http.StatusForbidden {
			t.Errorf("viewer's forged POST: status %d, want 403", status)
		}
		if got, _ := d.store.GetConnection(t.Context(), id); got.Version != cur.Version {
			t.Error("the viewer's POST changed the connection")
		}
	})

	t.Run("cross-site form POST refused", func(t *testing.T) {
		cur, _ := d.store.GetConnection(t.Context(), id)
		// Another site (localhost vs 127.0.0.1) with a form aimed at the dashboard.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/toggle">
				<input type="hidden" name="version" value="%d"><button id="go" type="submit">go</button></form>`,
				editURL, cur.Version)
		}))
		defer evil.Close()
		evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)
		run(t, tab, "open the other site", chromedp.Navigate(evilURL))
		if status := submit(t, tab, "#go"); status != http.StatusForbidden {
			t.Errorf("cross-site POST: status %d, want 403", status)
		}
		if got, _ := d.store.GetConnection(t.Context(), id); got.Version != cur.Version || !got.Enabled {
			t.Error("the cross-site POST changed the connection")
		}
	})
}

// writeShot saves a screenshot for a reviewer.
func writeShot(t *testing.T, dir, name string, png []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	t.Logf("screenshot %s", p)
	fmt.Println("screenshot:", p)
}
