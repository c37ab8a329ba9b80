package handlers

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestKeysInBrowser drives a real Chromium through the client keys pages: the list
// follows the live load, a key's row leads to its page, weight and models are set
// and saved there, and the page shows the stored values after the redirect.
func TestKeysInBrowser(t *testing.T) {
	t.Parallel()
	d := newDash(t)
	base := d.srv.URL
	k := d.createKey(t, "team-a", `{"maxConcurrent":8}`)
	d.createKey(t, "team-b", `{"weight":3}`)
	tab := newBrowser(t)
	shots, err := os.MkdirTemp("", "gatehouse-screens-")
	if err != nil {
		t.Fatal(err)
	}
	browserSignIn(t, tab, base, "admin@example.com")

	d.gates.set(live.Snapshot{Clients: []live.Client{{ID: k.ID, Name: "team-a", Cap: 8, InFlight: 1}}})
	row := `tr[data-client="` + k.ID + `"]`
	run(t, tab, "open keys", chromedp.Navigate(base+"/keys"), chromedp.WaitVisible(chromedp.CSS(row)))
	d.gates.set(live.Snapshot{Clients: []live.Client{{ID: k.ID, Name: "team-a", Cap: 8, InFlight: 8, Queued: 5}}})
	// The page polls /live; wait (bounded by browserStep) for the row to show the new load.
	load := value(t, tab, "live load", chromedp.Poll[string](`(() => {
		const r = document.querySelector('`+row+`');
		const s = r.querySelector('[data-live-client="inflight"]').textContent + " | " +
			r.querySelector('[data-live-client="queued"]').textContent;
		return s === "8 / 8 | 5" ? s : false;
	})()`))
	if load != "8 / 8 | 5" {
		t.Errorf("live in flight | queued %q, want 8 / 8 | 5", load)
	}
	writeShot(t, shots, "keys.png", value(t, tab, "screenshot", chromedp.FullScreenshot(100)))

	if status := submit(t, tab, row+` [data-testid="key-link"]`); status != http.StatusOK {
		t.Fatalf("follow the key's row: status %d", status)
	}
	if loc := value(t, tab, "location", chromedp.Location()); loc != base+"/keys/"+k.ID {
		t.Fatalf("the row led to %q", loc)
	}
	typeInto(t, tab, "weight", "4")
	typeInto(t, tab, "models", "zai/*\nglm-5")
	if status := submit(t, tab, tid("save")); status != http.StatusOK {
		t.Fatalf("save: status %d", status)
	}
	shown := value(t, tab, "saved values", chromedp.Evaluate[map[string]string](`({
		weight: document.querySelector('[data-testid="field-weight"]').value,
		maxConcurrent: document.querySelector('[data-testid="field-maxConcurrent"]').value,
		models: document.querySelector('[data-testid="field-models"]').value,
		flash: document.querySelector('[data-testid="flash-message"]').textContent.trim(),
	})`))
	want := map[string]string{"weight": "4", "maxConcurrent": "8", "models": "zai/*\nglm-5", "flash": "✓ Saved team-a: models → [\"zai/*\",\"glm-5\"], weight → 4"}
	if diff := cmp.Diff(want, shown); diff != "" {
		t.Errorf("page after save mismatch (-want +got):\n%s", diff)
	}
	got, _ := d.keyLimits(t, k.ID)
	if diff := cmp.Diff(map[string]any{"weight": 4.0, "maxConcurrent": 8.0, "models": []any{"zai/*", "glm-5"}}, got); diff != "" {
		t.Errorf("stored limits mismatch (-want +got):\n%s", diff)
	}
	writeShot(t, shots, "key-edit.png", value(t, tab, "screenshot", chromedp.FullScreenshot(100)))

	typeInto(t, tab, "weight", "0")
	if status := submit(t, tab, tid("save")); status != http.StatusUnprocessableEntity {
		t.Fatalf("bad weight: status %d, want 422", status)
	}
	if msg := value(t, tab, "error text", chromedp.Text(chromedp.CSS(tid("error-weight")))); strings.TrimSpace(msg) != "must be a whole number from 1 to 1000" {
		t.Errorf("error beside weight %q", msg)
	}
	writeShot(t, shots, "key-error.png", value(t, tab, "screenshot", chromedp.FullScreenshot(100)))

	// The overview names the keys waiting at the bottleneck; one click leads to a key.
	conn := d.createConnection(t, "zai-main", `{"modelConcurrency":{"glm-5":1}}`)
	b := d.createKey(t, "team-c", `{"weight":3}`)
	d.gates.set(live.Snapshot{
		Gates: []live.Gate{
			withLoad(connGate(conn.ID), live.Gate{InFlight: 1}),
			withLoad(modelGate(conn.ID, "glm-5"), live.Gate{Cap: 1, InFlight: 1, Queued: 9, QueuedByClient: map[string]int{k.ID: 6, b.ID: 3}}),
		},
		Clients: []live.Client{{ID: k.ID, Name: "team-a", Weight: 4, Cap: 8}, {ID: b.ID, Name: "team-c", Weight: 3}},
	})
	run(t, tab, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(tid("waiting-keys"))))
	writeShot(t, shots, "overview-waiting.png", value(t, tab, "screenshot", chromedp.FullScreenshot(100)))
	if status := submit(t, tab, `[data-testid="waiting-key"][data-client="`+b.ID+`"] a`); status != http.StatusOK {
		t.Fatalf("follow a waiting key: status %d", status)
	}
	if loc := value(t, tab, "location", chromedp.Location()); loc != base+"/keys/"+b.ID {
		t.Errorf("the waiting key led to %q", loc)
	}
}
