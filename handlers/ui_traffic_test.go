package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// storeRequestLog hands the gateway's records to a store.RequestLog, as cmd does.
type storeRequestLog struct{ l *store.RequestLog }

func (s *storeRequestLog) Record(r *gateway.RequestRecord) {
	s.l.Add(&store.RequestRow{
		StartedAt: r.StartedAt, KeyID: r.KeyID, KeyName: r.KeyName, ConnectionID: r.ConnectionID,
		ConnectionName: r.ConnectionName, Provider: r.Provider, Model: r.Model, UpstreamModel: r.UpstreamModel,
		Route: r.Route, Stream: r.Stream, Status: r.Status, Code: r.Code, Gate: r.Gate, Attempts: r.Attempts,
		TTFTMs: r.TTFTMs, TotalMs: r.TotalMs, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CostMicros: r.CostMicros,
	})
}

const trafficClientKey = "traffic-client-key-0123456789"

// trafficDash is a dashboard whose /v1 is a real gateway with one connection
// (zai-main, glm-5, a fake upstream reporting 300 tokens) and one client key
// (team-a, secret trafficClientKey), writing the real request log.
type trafficDash struct {
	*dash
	conn store.Connection
	key  store.ClientKey
}

func newTrafficDash(t *testing.T) *trafficDash {
	t.Helper()
	up := upstreamtest.NewServer(upstreamtest.Options{UsageTokens: 300})
	upSrv := httptest.NewServer(up)
	var key store.ClientKey
	rl := &storeRequestLog{}
	gw := gateway.New(gateway.Options{Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
		return gateway.ClientKey{ID: key.ID, Name: key.Name, Enabled: true}, s == trafficClientKey
	}, RequestLog: rl})
	d := newDashWith(t, func(deps *Deps) { deps.Gateway = gw }, func(s *Server) {
		rl.l = s.store.NewRequestLog(store.RequestLogOptions{})
	})
	l := rl.l
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = up.Close()
		gw.Close()
		upSrv.Close()
	})
	td := &trafficDash{dash: d}
	td.key = d.createKey(t, "team-a", `{}`)
	key = td.key
	td.conn = d.createConnection(t, "zai-main", `{}`)
	gw.Apply(gateway.Config{Connections: []gateway.Connection{{
		ID: td.conn.ID, Name: td.conn.Name, Provider: "zai", APIStyle: "openai", BaseURL: upSrv.URL + "/v1",
		APIKey: "upstream-key", Models: []string{"glm-5"}, Enabled: true,
	}}})
	return td
}

// chat sends one chat completion through the gateway with secret and model, and
// returns the status.
func (d *trafficDash) chat(t *testing.T, secret, model string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// TestOverviewErrorsInBrowser: a real Chromium on the overview; requests through
// the real gateway — one served, three for an unknown model (404) and three with a
// bad key (401) — appear without a reload: the last minute's error count rises to 6
// and names both codes, each linked to its requests; the connection shows its
// request and today's tokens, the key its 404s and tokens.
func TestOverviewErrorsInBrowser(t *testing.T) {
	t.Parallel()
	d := newTrafficDash(t)
	base := d.srv.URL
	tab := newBrowser(t)
	browserSignIn(t, tab, base, "viewer@example.com")
	run(t, tab, "open overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(tid("sum-errors"))))
	if got := value(t, tab, "errors at load", chromedp.Text(chromedp.CSS(tid("sum-errors")))); got != "0" {
		t.Fatalf("errors in the last minute at load = %q, want 0", got)
	}
	run(t, tab, "mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))

	if st := d.chat(t, trafficClientKey, "glm-5"); st != http.StatusOK {
		t.Fatalf("served request: status %d", st)
	}
	for range 3 {
		if st := d.chat(t, trafficClientKey, "no-such-model"); st != http.StatusNotFound {
			t.Fatalf("unknown model: status %d, want 404", st)
		}
		if st := d.chat(t, "not-a-key-0123456789", "glm-5"); st != http.StatusUnauthorized {
			t.Fatalf("bad key: status %d, want 401", st)
		}
	}

	// The page polls /live; wait (bounded by browserStep) for the count to rise.
	got := value(t, tab, "errors after 404s and 401s", chromedp.Poll[string](`(() => {
		const n = document.querySelector('[data-testid="sum-errors"]');
		return n && n.textContent === "6" && window.notReloaded ? n.textContent : false;
	})()`))
	if got != "6" {
		t.Fatalf("errors in the last minute = %q, want 6", got)
	}
	codes := value(t, tab, "codes named", chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-live-fragment="sum-errors"] [data-testid="error-code"]')].map(a => a.textContent + " -> " + new URL(a.href).search)`))
	if len(codes) != 2 {
		t.Fatalf("codes named %q, want two", codes)
	}
	for i, want := range []struct{ text, status string }{{"3 × 401 INVALID_API_KEY", "401"}, {"3 × 404 MODEL_NOT_FOUND", "404"}} {
		if !strings.HasPrefix(codes[i], want.text+" -> ") || !strings.Contains(codes[i], "status="+want.status) {
			t.Errorf("code %d = %q, want %q linked to its requests", i, codes[i], want)
		}
	}
	conn := value(t, tab, "connection traffic", chromedp.Poll[string](`(() => {
		const p = document.querySelector('[data-live-fragment="conn-`+d.conn.ID+`"]');
		const s = p && p.textContent.replace(/\s+/g, " ").trim();
		return s && s.includes("300 tokens") ? s : false;
	})()`))
	if !strings.HasPrefix(conn, "1 request in the last minute · 0 errors in the last minute") {
		t.Errorf("connection traffic %q", conn)
	}
	key := value(t, tab, "key traffic", chromedp.Evaluate[[]string](`(() => {
		const r = document.querySelector('[data-testid="key-traffic-row"][data-key="`+d.key.ID+`"]');
		return r ? ["key-rpm", "key-errors", "key-tokens"].map(id => r.querySelector('[data-testid="' + id + '"]').textContent.replace(/\s+/g, " ").trim()) : [];
	})()`))
	if strings.Join(key, " | ") != "4 | 3 3 × 404 MODEL_NOT_FOUND | 300" {
		t.Errorf("key row %q, want 4 | 3 3 × 404 MODEL_NOT_FOUND | 300", key)
	}
}
