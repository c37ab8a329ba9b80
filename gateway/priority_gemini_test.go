package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestPriorityGeminiAndRequestLog: the Gemini routes honour classes like the
// OpenAI ones (on a held cap-1 gate an interactive request queued after a
// batch one is admitted first; a header above the key's class is 400 in
// Gemini's shape), and the request log records each request's class: its
// key's, lowered by X-Gatehouse-Priority.
func TestPriorityGeminiAndRequestLog(t *testing.T) {
	t.Parallel()
	keys := priorityKeys()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{RecordHeaders: true}, withKeys(keys), func(o *Options) { o.RequestLog = log })
	g := e.geminiConn("g1", "google-key", "gemini-x")
	g.Overrides = caps(0, map[string]int{"gemini-x": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{g}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	const path = "/v1beta/models/gemini-x:generateContent"

	r := e.gemini(ctx, http.MethodPost, path, "X-Goog-Api-Key", "sk-b", HeaderPriority, "interactive")
	var ge geminiError
	if err := json.Unmarshal([]byte(r.body), &ge); err != nil || r.status != http.StatusBadRequest || ge.Error.Status != "INVALID_ARGUMENT" {
		t.Errorf("batch key asking for interactive on Gemini = %d %s, want 400 INVALID_ARGUMENT", r.status, r.body)
	}
	waitFor(t, 5*time.Second, "the refusal's record", func() bool { return len(log.all()) == 1 })

	hold := make(chan struct{})
	if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 4)
	send := func(name, secret string, hdr ...string) {
		go func() {
			done <- e.gemini(ctx, http.MethodPost, path, append([]string{"X-Goog-Api-Key", secret, "Idempotency-Key", name}, hdr...)...)
		}()
	}
	send("blocker", "sk-s")
	waitFor(t, 10*time.Second, "the blocker in flight", func() bool { return e.up.InFlight() == 1 })
	for i, q := range []struct{ name, secret, hdr string }{
		{"batch", "sk-b", ""}, {"lowered", "sk-i", "batch"}, {"standard", "sk-s", ""}, {"interactive", "sk-i", ""},
	} {
		var hdr []string
		if q.hdr != "" {
			hdr = []string{HeaderPriority, q.hdr}
		}
		send(q.name, q.secret, hdr...)
		waitFor(t, 10*time.Second, q.name+" queued", func() bool { return e.gate("model:g1:gemini-x").Queued == i+1 })
	}
	if err := e.up.SetDefault(upstreamtest.Behavior{}); err != nil {
		t.Fatal(err)
	}
	close(hold)
	for range 5 {
		if r := <-done; r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	if order, want := upstreamOrder(e), []string{"blocker", "interactive", "standard", "batch", "lowered"}; !slices.Equal(order, want) {
		t.Errorf("admission order on the Gemini route %v, want %v", order, want)
	}

	waitFor(t, 5*time.Second, "every record", func() bool { return len(log.all()) == 6 })
	got := map[string]string{}
	for _, rec := range log.all() {
		got[rec.KeyName+" "+http.StatusText(rec.Status)+" "+rec.Route] += rec.Priority + ";"
	}
	want := map[string]string{
		"b Bad Request gemini": "batch;",
		"s OK gemini":          "standard;standard;",
		"b OK gemini":          "batch;",
		"i OK gemini":          "",
	}
	// i's two requests: one lowered to batch, one interactive, in either order.
	if v := got["i OK gemini"]; v != "batch;interactive;" && v != "interactive;batch;" {
		t.Errorf("key i's records have classes %q, want batch and interactive", v)
	}
	delete(got, "i OK gemini")
	delete(want, "i OK gemini")
	for k, v := range want {
		if got[k] != v {
			t.Errorf("records %q have classes %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}
