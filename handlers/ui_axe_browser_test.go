package handlers

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
)

// axeVersion is the axe-core release the accessibility test runs.
const axeVersion = "4.14.1"

// axeSource returns axe-core's browser build (axe.min.js), installed with npm into
// the user's cache the first time (as the gateway's Gemini SDK test installs its
// SDK): never copied into the tree. Without npm the test is skipped, and says so.
func axeSource(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the axe-core accessibility test needs it to fetch axe-core")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("cache dir: %v", err)
	}
	dir := filepath.Join(cache, "gatehouse", "axe-core-"+axeVersion)
	file := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
	if _, err := os.Stat(file); err != nil {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--silent", "axe-core@"+axeVersion)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install axe-core@%s: %v\n%s", axeVersion, err, out)
		}
	}
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read axe-core: %v", err)
	}
	return string(src)
}

// axeViolation is one failed axe rule on a page, with where it failed.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// colorScheme makes the tab's pages see prefers-color-scheme as scheme, signed out.
func colorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			return err
		}
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	})
}

// TestAccessibilityInBrowser runs axe-core (WCAG 2.0/2.1 A and AA rules and axe's
// best practices) in a real Chromium on every dashboard page (the 404 page of an
// unknown path too), in light and in dark,
// with live numbers, a waiting queue, request-log rows, a form with errors and an
// audit trail on them, and the pages whose layout changes on a phone at 390 px: 0
// violations.
func TestAccessibilityInBrowser(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	d := newTrafficDash(t)
	c := d.conn
	d.gates.set(live.Snapshot{
		Gates: []live.Gate{
			withLoad(connGate(c.ID), live.Gate{Cap: 4, InFlight: 3, Queued: 2}),
			withLoad(modelGate(c.ID, "glm-5"), live.Gate{Cap: 1, InFlight: 1, Queued: 6}),
		},
		Clients: []live.Client{{ID: d.key.ID, Name: d.key.Name, Cap: 8, InFlight: 8, Queued: 5}},
	})
	d.chat(t, trafficClientKey, "glm-5")
	d.chat(t, trafficClientKey, "no-such-model")
	d.chat(t, "not-a-key-0123456789", "glm-5")
	rows := []store.RequestRow{{StartedAt: time.Now().UTC(), KeyID: d.key.ID, KeyName: d.key.Name, Model: "glm-5",
		Route: "chat", Status: 429, Code: "SEMAPHORE_TIMEOUT", Gate: "key:" + d.key.ID, TTFTMs: -1}}
	if err := d.store.WriteRequests(t.Context(), rows); err != nil {
		t.Fatal(err)
	}

	tab := newBrowser(t)
	login := d.srv.URL + "/login"
	pages := []string{"/", "/connections", "/connections/new", "/connections/" + c.ID, "/connections/" + c.ID + "/delete",
		"/settings", "/keys", "/keys/" + d.key.ID, "/keys/" + d.key.ID + "/revoke", "/tokens", "/audit", "/requests",
		"/requests/" + rows[0].ID, "/requests?last=1h", "/usage", "/usage?range=7d", "/users", "/account", "/logout", "/no-such-page"}
	for _, scheme := range []string{"light", "dark"} {
		t.Run(scheme, func(t *testing.T) {
			run(t, tab, "colour scheme", colorScheme(scheme))
			label := scheme // and the width, on the phone's pass
			// check runs axe on url, or on the page the tab shows when url is "".
			check := func(t *testing.T, url string) {
				t.Helper()
				if url != "" {
					run(t, tab, "open "+url, chromedp.Navigate(url))
				} else {
					url = value(t, tab, "location", chromedp.Location())
				}
				run(t, tab, "inject axe", chromedp.WaitReady(chromedp.CSS("main")), chromedp.Evaluate[chromedp.Void](axe))
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
					t.Errorf("%s (%s): %s [%s]: %s", strings.TrimPrefix(url, d.srv.URL), label, v.ID, v.Impact, strings.Join(where, "; "))
				}
			}
			check(t, login)
			typeInto(t, tab, "email", "admin@example.com")
			typeInto(t, tab, "password", "wrong password")
			submit(t, tab, tid("login-submit"))
			check(t, "") // the sign-in form with its error
			browserSignIn(t, tab, d.srv.URL, "admin@example.com")
			for _, p := range pages {
				check(t, d.srv.URL+p)
			}
			// The phone's layouts: the request list as cards, the charts' narrow axes.
			label = scheme + ", 390 px"
			run(t, tab, "phone viewport", chromedp.EmulateViewport(phoneWidth, 844))
			for _, p := range []string{"/", "/requests", "/usage", "/no-such-page"} {
				check(t, d.srv.URL+p)
			}
			label = scheme
			run(t, tab, "wide viewport", chromedp.EmulateViewport(1280, 900))
			// A form with errors: the summary, the marked fields, their messages.
			run(t, tab, "open edit", chromedp.Navigate(d.srv.URL+"/connections/"+c.ID))
			typeInto(t, tab, "modelConcurrency", "glm-5=0")
			submit(t, tab, tid("save"))
			check(t, "")
		})
	}
}
