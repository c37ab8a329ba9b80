package gateway

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// testOutbound is the upstream client every test gateway uses: the package's
// tests run once per client (scripts/test runs them again with
// -outbound=net/http), so that each behaviour holds on both.
var testOutbound = flag.String("outbound", OutboundFastHTTP, "upstream client of the test gateways: net/http or fasthttp")

func TestMain(m *testing.M) {
	flag.Parse()
	if !ValidOutbound(*testOutbound) {
		fmt.Fprintf(os.Stderr, "-outbound %q: want %s or %s\n", *testOutbound, OutboundNetHTTP, OutboundFastHTTP)
		os.Exit(2)
	}
	// fasthttp's idle-connection cleaner ends on its own, up to fastIdle after
	// a host's last connection closed.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"))
}

const testClientKey = "client-secret-key-0123456789"

// fakeClock is a settable clock for cooldowns and suspensions.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a gateway in front of a fake upstream, both over real HTTP.
type env struct {
	t      *testing.T
	up     *upstreamtest.Server
	upURL  string
	gw     *Gateway
	gwURL  string
	client *http.Client
}

type envOption func(*Options)

func withClock(c *fakeClock) envOption { return func(o *Options) { o.Now = c.Now } }

func newEnv(t *testing.T, upOpts upstreamtest.Options, opts ...envOption) *env {
	t.Helper()
	up := upstreamtest.NewServer(upOpts)
	upSrv := httptest.NewServer(up)
	o := Options{Outbound: *testOutbound, Authenticate: func(_ context.Context, s string) (ClientKey, bool) {
		return ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}}
	for _, f := range opts {
		f(&o)
	}
	gw := New(o)
	gwSrv := httptest.NewServer(gw)
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	e := &env{t: t, up: up, upURL: upSrv.URL, gw: gw, gwURL: gwSrv.URL, client: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = up.Close() // ends hanging upstream handlers first
		gwSrv.Close()
		gw.Close()
		upSrv.Close()
	})
	return e
}

// conn returns an enabled OpenAI-style connection to the fake upstream.
func (e *env) conn(id, key string, models ...string) Connection {
	return Connection{
		ID: id, Name: "conn-" + id, Provider: "zai", APIStyle: "openai",
		BaseURL: e.upURL + "/v1", APIKey: key, Models: models, Enabled: true,
	}
}

type reply struct {
	status int
	header http.Header
	body   string
}

// errorBody is both error shapes decoded.
type errorBody struct {
	Type  string `json:"type"`
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	var eb errorBody
	if err := json.Unmarshal([]byte(r.body), &eb); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.body, err)
	}
	return eb.Error.Code
}

// post sends body to path with the client key and extra headers.
func (e *env) post(ctx context.Context, path, body string, hdr ...string) reply {
	e.t.Helper()
	return e.send(ctx, http.MethodPost, path, body, hdr...)
}

// send is post with any method.
func (e *env) send(ctx context.Context, method, path, body string, hdr ...string) reply {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.gwURL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+testClientKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return reply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Errorf("%s %s: read body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func chatBody(model string, stream bool) string {
	s := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]`
	if stream {
		s += `,"stream":true`
	}
	return s + "}"
}

// chatBodyMax is a chat body that bounds its answer to maxTokens: a budget
// reservation estimates it at len(body)/4 + maxTokens tokens.
func chatBodyMax(model string, maxTokens int) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}],"max_tokens":` + strconv.Itoa(maxTokens) + "}"
}

// minWait is the shortest deadline waitFor allows.
const minWait = 15 * time.Second

// waitFor polls cond until it holds or the deadline passes. The deadline
// only bounds a wait, it is never what a test checks, so it is at least
// minWait: on 2 shared cores at load 25 a condition that holds within
// milliseconds on an idle machine has been seen to take over 2 s.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = max(d, minWait)
	deadline := time.Now().Add(d)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		<-tick.C
	}
}

// gate returns the snapshot of gate key (zero if absent).
func (e *env) gate(key string) live.Gate {
	for _, g := range e.gw.Snapshot().Gates {
		if g.Key == key {
			return g
		}
	}
	return live.Gate{Key: key}
}

func (e *env) health(id string) live.Connection {
	for _, c := range e.gw.Snapshot().Connections {
		if c.ID == id {
			return c
		}
	}
	e.t.Fatalf("connection %s not in snapshot", id)
	return live.Connection{}
}

// allGatesIdle reports whether no gate holds or queues anything.
func (e *env) allGatesIdle() bool {
	for _, g := range e.gw.Snapshot().Gates {
		if g.InFlight != 0 || g.Queued != 0 {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }

func caps(maxConc int, models map[string]int, maxWaitMs int) limits.Overrides {
	o := limits.Overrides{ModelConcurrency: models}
	if maxConc > 0 {
		o.MaxConcurrent = ptr(maxConc)
	}
	if maxWaitMs > 0 {
		o.MaxWaitMs = ptr(maxWaitMs)
	}
	return o
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
