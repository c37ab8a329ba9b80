package wsbridge_test

import (
	"context"
	"encoding/json"
	"io"

	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/gateway/wsbridge"
)

func TestMain(m *testing.M) {
	if up := os.Getenv(benchChildEnv); up != "" {
		serveBenchChild(up) // BenchmarkTurnGatewayCPU's gateway process
		return
	}
	goleak.VerifyTestMain(m)
}

// The client keys of the rig: codexKey is unlimited, spenderKey has a
// money budget of $0.01 a day, which a turn of pricedModel bounded to 1000
// output tokens overruns.
const (
	codexKey    = "codex-secret-key-0123456789"
	spenderKey  = "spender-secret-key-0123456789"
	freeModel   = "mock-model"
	pricedModel = "priced-model"
	upstreamKey = "upstream-key"
)

// requestLog keeps every record the gateway hands over.
type requestLog struct {
	mu   sync.Mutex
	rows []gateway.RequestRecord
}

func (l *requestLog) Record(r *gateway.RequestRecord) {
	l.mu.Lock()
	l.rows = append(l.rows, *r)
	l.mu.Unlock()
}

func (l *requestLog) all() []gateway.RequestRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]gateway.RequestRecord(nil), l.rows...)
}

// rig is a gateway behind the bridge, in front of a fake upstream, all over
// real HTTP.
type rig struct {
	t       testing.TB
	up      *upstreamtest.Server
	gw      *gateway.Gateway
	bridge  *wsbridge.Bridge
	srv     *httptest.Server
	log     *requestLog
	reg     *prometheus.Registry
	upgrade atomic.Int64 // upgrade requests seen
	out     *outCounter  // the gateway's requests to the upstream
}

type rigOptions struct {
	maxConcurrent int   // the connection's cap; 0 none
	maxBody       int64 // the gateway's body bound; 0 default
	idleMs        int   // defaultExecutionMaxWaitMs; 0 default
	tracer        trace.TracerProvider
	transport     http.RoundTripper // the gateway's upstream client; nil: its own
	up            upstreamtest.Options
}

func newRig(t testing.TB, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, up: upstreamtest.NewServer(o.up), log: &requestLog{}, reg: prometheus.NewRegistry()}
	upSrv := httptest.NewServer(r.up)
	r.out = &outCounter{rt: &http.Transport{}}
	o.transport = r.out
	r.gw, r.bridge = newGateway(upSrv.URL, o, r.reg, r.log)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Upgrade") != "" {
			r.upgrade.Add(1)
		}
		r.bridge.ServeHTTP(w, req)
	}))
	t.Cleanup(func() {
		_ = r.up.Close() // ends held upstream answers first
		r.srv.Close()
		r.gw.Close()
		upSrv.Close()
		r.out.rt.(*http.Transport).CloseIdleConnections()
	})
	return r
}

// outCounter is the gateway's upstream client, counting the requests it has
// outstanding: from the request's start to the end of its answer's body
// (read to its end, or closed). Its peak is how many requests the gateway
// had at the upstream at once, which the connection's cap bounds.
type outCounter struct {
	rt        http.RoundTripper
	cur, peak atomic.Int64
}

func (c *outCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	n := c.cur.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		c.cur.Add(-1)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, c: c}
	return resp, nil
}

// countedBody ends its request's count at its end or close, once.
type countedBody struct {
	io.ReadCloser
	c    *outCounter
	once sync.Once
}

func (b *countedBody) end() { b.once.Do(func() { b.c.cur.Add(-1) }) }

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *countedBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

// newGateway is the rig's gateway and bridge in front of the upstream at
// upURL, with the rig's keys, prices and one connection.
func newGateway(upURL string, o rigOptions, reg prometheus.Registerer, log gateway.RequestLog) (*gateway.Gateway, *wsbridge.Bridge) {
	keys := map[string]gateway.ClientKey{
		codexKey: {ID: "k-codex", Name: "codex", Enabled: true},
		spenderKey: {ID: "k-spender", Name: "spender", Enabled: true,
			Limits: limits.ClientKeyLimits{BudgetUSDDaily: new(limits.Micros(10_000))}},
	}
	gw := gateway.New(gateway.Options{
		Outbound: gateway.OutboundNetHTTP, Registerer: reg, RequestLog: log, MaxBodyBytes: o.maxBody, TracerProvider: o.tracer,
		Transport: o.transport,
		Authenticate: func(_ context.Context, secret string) (gateway.ClientKey, bool) {
			k, ok := keys[secret]
			return k, ok
		},
	})
	bridge := wsbridge.New(gw, wsbridge.Options{Registerer: reg})
	var ov limits.Overrides
	if o.maxConcurrent > 0 {
		ov.MaxConcurrent = new(o.maxConcurrent)
	}
	settings := limits.Settings{Prices: limits.Prices{pricedModel: {
		Input: new(limits.Micros(100 * limits.MicrosPerUSD)), Output: new(limits.Micros(100 * limits.MicrosPerUSD))}}}
	if o.idleMs > 0 {
		settings.DefaultExecutionMaxWaitMs = new(o.idleMs)
	}
	var ck []gateway.ClientKey
	for _, k := range keys {
		ck = append(ck, k)
	}
	gw.Apply(gateway.Config{Settings: settings, ClientKeys: ck, Connections: []gateway.Connection{{
		ID: "c1", Name: "conn-c1", Provider: "openai", APIStyle: "openai", BaseURL: upURL + "/v1",
		APIKey: upstreamKey, Models: []string{freeModel, pricedModel}, Enabled: true, Overrides: ov,
	}}})
	return gw, bridge
}

// dial opens a socket with the client key secret.
func (r *rig) dial(ctx context.Context, secret string) *websocket.Conn {
	r.t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+secret)
	h.Set("OpenAI-Beta", "responses_websockets=2026-02-06")
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.srv.URL, "http")+wsbridge.Path,
		&websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		r.t.Fatalf("dial: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		r.t.Fatalf("dial: status %d", resp.StatusCode)
	}
	c.SetReadLimit(-1)
	r.t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// create is a response.create message.
func create(model, input string, extra string) []byte {
	return []byte(`{"type":"response.create","model":"` + model + `","input":[{"type":"message","role":"user","content":"` +
		input + `"}]` + extra + `}`)
}

// event is what a test reads of a message.
type event struct {
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Response struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"response"`
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	RetryAfter int               `json:"retry_after"`
	Headers    map[string]string `json:"headers"`
}

// readTurn reads messages until the turn's last (response.completed,
// response.failed or error) and returns them.
func readTurn(ctx context.Context, t *testing.T, c *websocket.Conn) []event {
	t.Helper()
	var evs []event
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read after %d messages: %v", len(evs), err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("message type %v, want text", typ)
		}
		var ev event
		if err := json.Unmarshal(data, &ev); err != nil {
			t.Fatalf("message %q is not JSON: %v", data, err)
		}
		evs = append(evs, ev)
		switch ev.Type {
		case "response.completed", "response.failed", "error":
			return evs
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds; the deadline only bounds the wait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (r *rig) gateInFlight(key string) int {
	for _, g := range r.gw.Snapshot().Gates {
		if g.Key == key {
			return g.InFlight
		}
	}
	return 0
}

func (r *rig) openSockets() float64 {
	n, err := testutil.GatherAndCount(r.reg, "gatehouse_websocket_open")
	if err != nil || n != 1 {
		r.t.Fatalf("gatehouse_websocket_open: %d series, %v", n, err)
	}
	mfs, _ := r.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "gatehouse_websocket_open" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

// Two turns sent at once on one socket are answered one after the other, in
// order, each a whole event stream; each is one request-log row.
func TestTwoTurnsAnsweredInOrder(t *testing.T) {
	r := newRig(t, rigOptions{up: upstreamtest.Options{Chunks: 4}})
	ctx := testCtx(t)
	c := r.dial(ctx, codexKey)
	if got := r.openSockets(); got != 1 {
		t.Errorf("gatehouse_websocket_open = %v with one socket, want 1", got)
	}
	for _, in := range []string{"first", "second"} {
		if err := c.Write(ctx, websocket.MessageText, create(freeModel, in, "")); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for turn := range 2 {
		evs := readTurn(ctx, t, c)
		if evs[0].Type != "response.created" || evs[len(evs)-1].Type != "response.completed" {
			t.Fatalf("turn %d: events %v, want response.created … response.completed", turn, types(evs))
		}
		if len(evs) < 4 {
			t.Errorf("turn %d: %d events, want the whole stream (deltas included)", turn, len(evs))
		}
		ids = append(ids, evs[len(evs)-1].Response.ID)
	}
	if ids[0] == ids[1] || ids[0] == "" {
		t.Errorf("response ids %v: want two distinct responses", ids)
	}
	// The upstream numbers its responses in arrival order.
	if n0, n1 := idNum(t, ids[0]), idNum(t, ids[1]); n0 >= n1 {
		t.Errorf("turns answered out of order: %v", ids)
	}
	waitFor(t, "a row per turn", func() bool { return len(r.log.all()) >= 2 })
	rows := r.log.all()
	if len(rows) != 2 {
		t.Fatalf("request log has %d rows, want one per turn (2): %+v", len(rows), rows)
	}
	for _, row := range rows {
		if row.Route != "responses" || row.Status != http.StatusOK || !row.Stream || row.KeyName != "codex" {
			t.Errorf("row %+v: want responses, 200, stream, key codex", row)
		}
	}
	// The gateway's metrics count the turns, not the socket.
	want := `
		# HELP gatehouse_client_requests_total x
		# TYPE gatehouse_client_requests_total counter
		gatehouse_client_requests_total{client="codex",status="200"} 2
		gatehouse_client_requests_total{client="spender",status="200"} 0
	`
	if err := testutil.GatherAndCompare(helpless{r.reg}, strings.NewReader(want), "gatehouse_client_requests_total"); err != nil {
		t.Errorf("client metrics: %v", err)
	}
	_ = c.Close(websocket.StatusNormalClosure, "")
	waitFor(t, "the socket's gauge back to 0", func() bool { return r.openSockets() == 0 })
}

func types(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func idNum(t *testing.T, id string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimPrefix(id, "resp_mock"))
	if err != nil {
		t.Fatalf("response id %q: %v", id, err)
	}
	return n
}

// A key over its money budget gets an error message with BUDGET_EXCEEDED and
// its Retry-After, and the socket answers the next turn.
func TestBudgetExceededIsAMessage(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := testCtx(t)
	c := r.dial(ctx, spenderKey)
	if err := c.Write(ctx, websocket.MessageText, create(pricedModel, "expensive", `,"max_output_tokens":1000`)); err != nil {
		t.Fatal(err)
	}
	evs := readTurn(ctx, t, c)
	e := evs[len(evs)-1]
	if len(evs) != 1 || e.Type != "error" || e.Error.Code != gateway.CodeBudgetExceeded || e.Status != http.StatusTooManyRequests {
		t.Fatalf("events %+v: want one error message, 429 BUDGET_EXCEEDED", evs)
	}
	if e.RetryAfter <= 0 || e.Headers["retry-after"] != strconv.Itoa(e.RetryAfter) {
		t.Errorf("retry_after %d, headers %v: want the Retry-After seconds in both", e.RetryAfter, e.Headers)
	}
	if r.up.Requests(upstreamKey, pricedModel) != 0 {
		t.Errorf("the refused turn reached the upstream")
	}
	if err := c.Write(ctx, websocket.MessageText, create(freeModel, "cheap", "")); err != nil {
		t.Fatal(err)
	}
	if evs := readTurn(ctx, t, c); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("next turn: %v, want response.completed on the same socket", types(evs))
	}
	waitFor(t, "a row per turn", func() bool { return len(r.log.all()) >= 2 })
	rows := r.log.all()
	if len(rows) != 2 || rows[0].Code != gateway.CodeBudgetExceeded || rows[1].Status != http.StatusOK {
		t.Errorf("request log %+v: want the refusal (BUDGET_EXCEEDED) and the answer", rows)
	}
}

// A client that closes its socket mid-turn cancels the turn like a hang-up:
// the upstream request ends and the gate's permit is released.
func TestCloseMidTurnFreesPermit(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	r := newRig(t, rigOptions{maxConcurrent: 1})
	if err := r.up.SetDefault(upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	c := r.dial(ctx, codexKey)
	if err := c.Write(ctx, websocket.MessageText, create(freeModel, "long", "")); err != nil {
		t.Fatal(err)
	}
	if err := r.up.WaitInFlight(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := r.gateInFlight("connection:c1"); got != 1 {
		t.Fatalf("gate in-flight %d during the turn, want 1", got)
	}
	_ = c.CloseNow()
	waitFor(t, "the gate's in-flight back to 0", func() bool { return r.gateInFlight("connection:c1") == 0 })
	waitFor(t, "the upstream request to end", func() bool { return r.up.InFlight() == 0 })
	waitFor(t, "the turn's request-log row", func() bool { return len(r.log.all()) == 1 })
	if row := r.log.all()[0]; row.Status != 499 {
		t.Errorf("row status %d, want 499 (client gone)", row.Status)
	}
	waitFor(t, "the socket's gauge back to 0", func() bool { return r.openSockets() == 0 })
}

// A message beyond the request body bound closes the socket with 1009.
func TestOversizedMessageCloses1009(t *testing.T) {
	r := newRig(t, rigOptions{maxBody: 1024})
	ctx := testCtx(t)
	c := r.dial(ctx, codexKey)
	if err := c.Write(ctx, websocket.MessageText, create(freeModel, strings.Repeat("x", 2048), "")); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Read(ctx)
	if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
		t.Fatalf("read after an oversized message: %v (close status %d), want close 1009", err, got)
	}
	if n := len(r.log.all()); n != 0 {
		t.Errorf("%d request-log rows, want none (no turn ran)", n)
	}
}

// Four sockets at once through a connection capped at 2: the upstream never
// sees more than 2, every turn completes, and the request log has one row
// per turn, none of them a 405.
func TestFourSocketsThroughCapOfTwo(t *testing.T) {
	r := newRig(t, rigOptions{maxConcurrent: 2, up: upstreamtest.Options{Chunks: 4, ChunkInterval: 2 * time.Millisecond}})
	ctx := testCtx(t)
	const sockets, turns = 4, 3
	var wg sync.WaitGroup
	var completed atomic.Int64
	for i := range sockets {
		c := r.dial(ctx, codexKey)
		wg.Go(func() {
			for j := range turns {
				if err := c.Write(ctx, websocket.MessageText, create(freeModel, "agent "+strconv.Itoa(i)+" turn "+strconv.Itoa(j), "")); err != nil {
					t.Error(err)
					return
				}
				if evs := readTurn(ctx, t, c); evs[len(evs)-1].Type == "response.completed" {
					completed.Add(1)
				} else {
					t.Errorf("socket %d turn %d: %v", i, j, types(evs))
				}
			}
			_ = c.Close(websocket.StatusNormalClosure, "")
		})
	}
	wg.Wait()
	if got := completed.Load(); got != sockets*turns {
		t.Errorf("%d turns completed, want %d", got, sockets*turns)
	}
	if peak := r.up.Peak(upstreamKey, freeModel); peak > 2 || peak < 1 {
		t.Errorf("upstream peak in flight %d, want 1..2 (the cap)", peak)
	}
	if peak := r.out.peak.Load(); peak > 2 {
		t.Errorf("upstream requests outstanding at once: %d, want ≤ 2 (the cap)", peak)
	}
	waitFor(t, "a row per turn", func() bool { return len(r.log.all()) >= sockets*turns })
	rows := r.log.all()
	if len(rows) != sockets*turns {
		t.Errorf("request log has %d rows, want %d (one per turn)", len(rows), sockets*turns)
	}
	for _, row := range rows {
		if row.Status != http.StatusOK || row.Route != "responses" {
			t.Errorf("row %+v: want 200 responses", row)
		}
	}
	if r.upgrade.Load() != sockets {
		t.Errorf("%d upgrades, want %d", r.upgrade.Load(), sockets)
	}
}

// The key is checked before the upgrade: without a valid key there is no
// socket, only the gateway's 401; a plain GET keeps its 405.
func TestUpgradeNeedsKeyAndPlainGetKeeps405(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := testCtx(t)
	for _, secret := range []string{"", "wrong-secret-key-0123456789"} {
		h := http.Header{}
		if secret != "" {
			h.Set("Authorization", "Bearer "+secret)
		}
		c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.srv.URL, "http")+wsbridge.Path, &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			_ = c.CloseNow()
			t.Fatalf("key %q: upgraded, want 401", secret)
		}
		if resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("key %q: %v, want 401", secret, err)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+wsbridge.Path, nil)
	req.Header.Set("Authorization", "Bearer "+codexKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || body.Error.Code != gateway.CodeMethodNotAllowed {
		t.Errorf("plain GET: %d %q, want 405 METHOD_NOT_ALLOWED", resp.StatusCode, body.Error.Code)
	}
	if got := r.openSockets(); got != 0 {
		t.Errorf("gatehouse_websocket_open = %v, want 0", got)
	}
	http.DefaultClient.CloseIdleConnections()
	// Refused upgrades are logged like any refused request.
	waitFor(t, "three rows", func() bool { return len(r.log.all()) >= 3 })
	var codes []string
	for _, row := range r.log.all() {
		codes = append(codes, strconv.Itoa(row.Status)+" "+row.Code)
	}
	if want := "401 MISSING_API_KEY,401 INVALID_API_KEY,405 METHOD_NOT_ALLOWED"; strings.Join(codes, ",") != want {
		t.Errorf("request log %v, want %s", codes, want)
	}
}

// A turn goes upstream as a streaming POST with the client's own headers
// and none of the upgrade's: no Upgrade or Sec-WebSocket-*, and of
// OpenAI-Beta only what is not the WebSocket mode's token.
func TestTurnHeadersUpstream(t *testing.T) {
	r := newRig(t, rigOptions{up: upstreamtest.Options{RecordHeaders: true}})
	ctx := testCtx(t)
	h := http.Header{}
	h.Set("Authorization", "Bearer "+codexKey)
	h.Set("OpenAI-Beta", "responses_websockets=2026-02-06, assistants=v2")
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.srv.URL, "http")+wsbridge.Path, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.CloseNow() }()
	if err := c.Write(ctx, websocket.MessageText, create(freeModel, "hi", "")); err != nil {
		t.Fatal(err)
	}
	readTurn(ctx, t, c)
	got := r.up.ReceivedHeaders()
	if len(got) != 1 {
		t.Fatalf("%d upstream requests, want 1", len(got))
	}
	up := got[0]
	if v := up.Get("OpenAI-Beta"); v != "assistants=v2" {
		t.Errorf("OpenAI-Beta upstream %q, want assistants=v2", v)
	}
	if v := up.Get("Authorization"); v != "Bearer "+upstreamKey {
		t.Errorf("Authorization upstream %q, want the connection's key", v)
	}
	for k := range up {
		if strings.HasPrefix(k, "Sec-Websocket") || k == "Upgrade" {
			t.Errorf("upgrade header %s reached the upstream", k)
		}
	}
}

// A stream that breaks off mid-turn ends with an error message (the
// gateway's UPSTREAM_STREAM_ERROR event), and the socket takes the next turn.
func TestStreamCutIsAnErrorMessage(t *testing.T) {
	r := newRig(t, rigOptions{})
	if err := r.up.SetDefault(upstreamtest.Behavior{Fail: upstreamtest.FailStreamCut, FailTimes: 1}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	c := r.dial(ctx, codexKey)
	if err := c.Write(ctx, websocket.MessageText, create(freeModel, "cut", "")); err != nil {
		t.Fatal(err)
	}
	evs := readTurn(ctx, t, c)
	e := evs[len(evs)-1]
	if e.Type != "error" || e.Status != http.StatusBadGateway || e.Error.Code != gateway.CodeUpstreamStreamErr || len(evs) < 2 {
		t.Fatalf("events %v, last %+v: want the stream's start, then a 502 UPSTREAM_STREAM_ERROR error message", types(evs), e)
	}
	if err := c.Write(ctx, websocket.MessageText, create(freeModel, "again", "")); err != nil {
		t.Fatal(err)
	}
	if evs := readTurn(ctx, t, c); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("next turn: %v", types(evs))
	}
}

// A socket idle for defaultExecutionMaxWaitMs is closed with 1001; so is an
// open one on shutdown, after which Wait returns.
func TestIdleAndShutdownClose1001(t *testing.T) {
	r := newRig(t, rigOptions{idleMs: 50})
	ctx := testCtx(t)
	c := r.dial(ctx, codexKey)
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("idle socket: %v, want close 1001", err)
	}

	r2 := newRig(t, rigOptions{})
	c2 := r2.dial(ctx, codexKey)
	if err := c2.Write(ctx, websocket.MessageText, create(freeModel, "before", "")); err != nil {
		t.Fatal(err)
	}
	readTurn(ctx, t, c2)
	r2.gw.Drain()
	r2.bridge.Shutdown()
	if _, _, err := c2.Read(ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Fatalf("socket on shutdown: %v, want close 1001", err)
	}
	if err := r2.bridge.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

// Messages other than response.create: an acknowledgement is ignored, an
// unknown type or a message that is not JSON gets an error message naming
// what is wrong, and the socket stays.
func TestOtherMessages(t *testing.T) {
	r := newRig(t, rigOptions{})
	ctx := testCtx(t)
	c := r.dial(ctx, codexKey)
	for _, m := range []string{`{"type":"response.processed","response_id":"resp_x"}`, `{"type":"session.update"}`, `not json`} {
		if err := c.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{`"session.update"`, "not a JSON object"} {
		evs := readTurn(ctx, t, c)
		if e := evs[0]; e.Type != "error" || e.Error.Code != gateway.CodeInvalidRequest || !strings.Contains(e.Error.Message, want) {
			t.Errorf("got %+v, want an INVALID_REQUEST error naming %s", e, want)
		}
	}
	if err := c.Write(ctx, websocket.MessageText, create(freeModel, "still here", "")); err != nil {
		t.Fatal(err)
	}
	if evs := readTurn(ctx, t, c); evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("turn after bad messages: %v", types(evs))
	}
	waitFor(t, "the turn's row", func() bool { return len(r.log.all()) >= 1 })
	if n := len(r.log.all()); n != 1 {
		t.Errorf("%d request-log rows, want 1 (bad messages are no requests)", n)
	}
}

// Each turn is traced like the request it is: one server span per turn.
func TestTurnsAreTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	r := newRig(t, rigOptions{tracer: tp})
	ctx := testCtx(t)
	c := r.dial(ctx, codexKey)
	for _, in := range []string{"one", "two"} {
		if err := c.Write(ctx, websocket.MessageText, create(freeModel, in, "")); err != nil {
			t.Fatal(err)
		}
		readTurn(ctx, t, c)
	}
	servers := func() int {
		n := 0
		for _, sp := range rec.Ended() {
			if sp.SpanKind() == trace.SpanKindServer {
				n++
			}
		}
		return n
	}
	waitFor(t, "two server spans", func() bool { return servers() >= 2 })
	if n := servers(); n != 2 {
		t.Errorf("%d server spans, want one per turn (2)", n)
	}
}

// helpless gathers g's metrics without their help texts, so that a test
// compares only names, labels and values.
type helpless struct{ g prometheus.Gatherer }

func (h helpless) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := h.g.Gather()
	for _, mf := range mfs {
		mf.Help = proto.String("x")
	}
	return mfs, err
}
