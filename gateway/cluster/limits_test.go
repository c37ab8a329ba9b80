package cluster

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

const testClientKey = "client-key"

// twoGateways is two gateway replicas in one process, each with its own
// Redis client, cluster controller and shared limits on the same Redis and
// prefix, in front of one fake upstream.
type twoGateways struct {
	t     *testing.T
	up    *upstreamtest.Server
	upURL string
	gws   [2]*gateway.Gateway
	urls  [2]string
	hc    *http.Client
}

func newTwoGateways(t *testing.T, upOpts upstreamtest.Options) *twoGateways {
	t.Helper()
	prefix := uniquePrefix(t)
	up := upstreamtest.NewServer(upOpts)
	upSrv := httptest.NewServer(up)
	tr := &http.Transport{MaxIdleConnsPerHost: 32}
	e := &twoGateways{t: t, up: up, upURL: upSrv.URL, hc: &http.Client{Transport: tr}}
	var srvs [2]*httptest.Server
	for i := range e.gws {
		rdb := newClient(t, shared.sock)
		ctrl := newController(t, rdb, Options{Prefix: prefix, ReplicaID: []string{"a", "b"}[i]})
		lim, err := NewLimits(LimitsOptions{Client: rdb, Prefix: prefix, OpTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		e.gws[i] = gateway.New(gateway.Options{
			Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
				return gateway.ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
			},
			Admission:    ctrl,
			SharedLimits: lim,
		})
		srvs[i] = httptest.NewServer(e.gws[i])
		e.urls[i] = srvs[i].URL
	}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = up.Close()
		for i := range srvs {
			srvs[i].Close()
			e.gws[i].Close()
		}
		upSrv.Close()
	})
	return e
}

// conn is an enabled OpenAI-style connection to the fake upstream serving m.
func (e *twoGateways) conn(id, key string, priority int, o limits.Overrides) gateway.Connection {
	return gateway.Connection{ID: id, Name: "conn-" + id, Provider: "zai", APIStyle: "openai",
		BaseURL: e.upURL + "/v1", APIKey: key, Models: []string{"m"}, Priority: priority, Enabled: true, Overrides: o}
}

func (e *twoGateways) apply(conns ...gateway.Connection) {
	for _, gw := range e.gws {
		gw.Apply(gateway.Config{Connections: conns})
	}
}

type reply struct {
	status int
	header http.Header
	code   string
}

// post sends a chat completion for model m through gateway i.
func (e *twoGateways) post(ctx context.Context, i int) reply {
	e.t.Helper()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[i]+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testClientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Errorf("POST via gateway %d: %v", i, err)
		return reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != http.StatusOK {
		var eb struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &eb)
		r.code = eb.Error.Code
	}
	return r
}

func ptr[T any](v T) *T { return &v }

// TestSharedSpacingAcrossGateways: requests alternating between two
// gateways reach the upstream no closer together than the connection's
// minTime, as one gateway would space them.
func TestSharedSpacingAcrossGateways(t *testing.T) {
	const spacing = 500 * time.Millisecond
	e := newTwoGateways(t, upstreamtest.Options{})
	e.apply(e.conn("a", "ka", 0, limits.Overrides{MinTimeMs: ptr(int(spacing / time.Millisecond)), MaxWaitMs: ptr(10000)}))
	ctx := t.Context()
	const n = 6
	// Anchored before any dispatch: the first turn is reserved no earlier
	// than sent and turn i comes i spacings after it (on Redis's clock), so
	// arrival i (sorted) is at least i spacings after sent, however late the
	// loopback delivers any of them. Without sharing, the two gateways
	// dispatch in pairs: arrival 1 comes with arrival 0.
	sent := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if r := e.post(ctx, i%2); r.status != http.StatusOK {
				t.Errorf("request %d: status %d (%s), want 200", i, r.status, r.code)
			}
		})
	}
	wg.Wait()
	arr := e.up.Arrivals("ka", "m")
	if len(arr) != n {
		t.Fatalf("upstream saw %d requests, want %d", len(arr), n)
	}
	slices.SortFunc(arr, func(a, b time.Time) int { return a.Compare(b) })
	for i, at := range arr {
		since := at.Sub(sent)
		t.Logf("arrival %d: %s after the requests were sent", i, since.Round(time.Millisecond))
		// The slack covers Redis's wall clock against this process's monotonic one.
		if want := time.Duration(i)*spacing - 5*time.Millisecond; since < want {
			t.Errorf("arrival %d came %s after the requests were sent, want at least %s (%d × minTime %s)", i, since, want, i, spacing)
		}
	}
}

// TestSharedSpacingTooLate: a turn beyond the wait bound, reserved through
// the other gateway, is refused at once with RATE_LIMIT_RPM.
func TestSharedSpacingTooLate(t *testing.T) {
	e := newTwoGateways(t, upstreamtest.Options{})
	e.apply(e.conn("a", "ka", 0, limits.Overrides{RPM: ptr(1), MaxWaitMs: ptr(1000)}))
	ctx := t.Context()
	if r := e.post(ctx, 0); r.status != http.StatusOK {
		t.Fatalf("first request: status %d (%s), want 200", r.status, r.code)
	}
	r := e.post(ctx, 1)
	if r.status != http.StatusTooManyRequests || r.code != gateway.CodeRateLimitRPM {
		t.Fatalf("second request via the other gateway: status %d code %q, want 429 %s", r.status, r.code, gateway.CodeRateLimitRPM)
	}
	// At once: it waited for nothing (no admission wait, no turn) before the
	// refusal, and the turn it was refused is the one reserved through the
	// other gateway, about a minute away.
	if got := r.header.Get(gateway.HeaderQueueMs); got != "0" {
		t.Errorf("%s = %q, want 0: the refusal comes before any wait", gateway.HeaderQueueMs, got)
	}
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 55 || ra > 60 {
		t.Errorf("Retry-After = %q, want the ~60 s to the turn reserved through the other gateway", r.header.Get("Retry-After"))
	}
	if got := r.header.Get("X-Gatehouse-Gate"); got != "rpm:a" {
		t.Errorf("gate = %q, want rpm:a", got)
	}
	if got := e.up.Requests("ka", "m"); got != 1 {
		t.Errorf("upstream saw %d requests, want 1", got)
	}
}

// coolCase is one case of the shared-cooldown tests: while connection a cools,
// gateway B answers wantStatus and wantCode.
type coolCase struct {
	name string
	// withB adds a second, lower-priority connection b.
	withB      bool
	wantStatus int
	wantCode   string
}

var coolCases = []coolCase{
	{name: "fails over to another candidate", withB: true, wantStatus: http.StatusOK},
	{name: "no other candidate", wantStatus: http.StatusTooManyRequests, wantCode: gateway.CodeUpstreamCooldown},
}

// newCoolingPair is two gateways with connection a (priority 10) applied and,
// withB, connection b (priority 0) below it.
func newCoolingPair(t *testing.T, withB bool) *twoGateways {
	t.Helper()
	e := newTwoGateways(t, upstreamtest.Options{})
	conns := []gateway.Connection{e.conn("a", "ka", 10, limits.Overrides{})}
	if withB {
		conns = append(conns, e.conn("b", "kb", 0, limits.Overrides{}))
	}
	e.apply(conns...)
	return e
}

// TestSharedCooldown: a 429 with Retry-After seen through gateway A makes
// gateway B skip the connection until the cooldown ends.
func TestSharedCooldown(t *testing.T) {
	for _, tc := range coolCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCoolingPair(t, tc.withB)
			if err := e.up.SetKeyBehavior("ka", upstreamtest.Behavior{Fail: "429", RetryAfter: 2 * time.Second, FailTimes: 1}); err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			// Anchored before the 429: the cooldown starts no earlier than
			// sent, so a's next request cannot arrive before sent + 2 s
			// however slow the machine (it can only come later).
			sent := time.Now()
			first := e.post(ctx, 0)
			if got := e.up.Requests("ka", "m"); got != 1 {
				t.Fatalf("a got %d requests through gateway A, want 1", got)
			}
			r := e.post(ctx, 1)
			if r.status != tc.wantStatus || r.code != tc.wantCode {
				t.Fatalf("gateway B while a cools: status %d code %q, want %d %q (A answered %d)",
					r.status, r.code, tc.wantStatus, tc.wantCode, first.status)
			}
			if tc.withB && r.header.Get(gateway.HeaderConnection) != "conn-b" {
				t.Errorf("gateway B served by %q, want conn-b", r.header.Get(gateway.HeaderConnection))
			}
			if got := e.up.Requests("ka", "m"); got != 1 {
				t.Fatalf("gateway B tried a while it cooled (a has %d requests)", got)
			}
			// After the cooldown, gateway B uses a again.
			waitFor(t, 5*time.Second, "gateway B to use a again", func() bool {
				return e.post(ctx, 1).status == http.StatusOK && e.up.Requests("ka", "m") == 2
			})
			arr := e.up.Arrivals("ka", "m")
			if len(arr) != 2 {
				t.Fatalf("a saw %d requests, want 2", len(arr))
			}
			since := arr[1].Sub(sent)
			t.Logf("a was used again %s after its 429 was asked for (cooldown 2s)", since.Round(time.Millisecond))
			// The slack covers the cooldown's stored milliseconds.
			if since < 2*time.Second-5*time.Millisecond {
				t.Errorf("a was used again %s after its 429 was asked for, before its 2s cooldown ended", since)
			}
		})
	}
}

// TestSharedSuspension: a 401 seen through gateway A suspends the
// connection on gateway B too.
func TestSharedSuspension(t *testing.T) {
	e := newTwoGateways(t, upstreamtest.Options{})
	e.apply(e.conn("a", "ka", 10, limits.Overrides{}), e.conn("b", "kb", 0, limits.Overrides{}))
	if err := e.up.SetKeyBehavior("ka", upstreamtest.Behavior{Fail: "401"}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if r := e.post(ctx, 0); r.status != http.StatusOK {
		t.Fatalf("gateway A: status %d (%s), want 200 via b", r.status, r.code)
	}
	r := e.post(ctx, 1)
	if r.status != http.StatusOK || r.header.Get(gateway.HeaderConnection) != "conn-b" {
		t.Fatalf("gateway B: status %d via %q, want 200 via conn-b", r.status, r.header.Get(gateway.HeaderConnection))
	}
	if got := e.up.Requests("ka", "m"); got != 1 {
		t.Errorf("a got %d requests, want 1: gateway B should see it suspended", got)
	}
	// Resetting through B clears the shared suspension for A too.
	e.up.ClearBehaviors()
	if !e.gws[1].ResetHealth(t.Context(), "a") || !e.gws[0].ResetHealth(t.Context(), "a") {
		t.Fatal("ResetHealth(a) = false")
	}
	if r := e.post(ctx, 0); r.header.Get(gateway.HeaderConnection) != "conn-a" {
		t.Errorf("after reset, gateway A served by %q, want conn-a", r.header.Get(gateway.HeaderConnection))
	}
}

// TestSharedTPM: tokens charged through gateway A exhaust the tpm window on
// gateway B.
func TestSharedTPM(t *testing.T) {
	// 350 tokens against tpm 100: the debt outlasts any minute boundary
	// the test may cross.
	e := newTwoGateways(t, upstreamtest.Options{UsageTokens: 350})
	e.apply(e.conn("a", "ka", 0, limits.Overrides{TPM: ptr(int64(100))}))
	ctx := t.Context()
	if r := e.post(ctx, 0); r.status != http.StatusOK {
		t.Fatalf("gateway A: status %d (%s), want 200", r.status, r.code)
	}
	r := e.post(ctx, 1)
	if r.status != http.StatusTooManyRequests || r.code != gateway.CodeRateLimitTPM {
		t.Fatalf("gateway B: status %d code %q, want 429 %s", r.status, r.code, gateway.CodeRateLimitTPM)
	}
	if got := r.header.Get("X-Gatehouse-Gate"); got != "tpm:a" {
		t.Errorf("gate = %q, want tpm:a", got)
	}
	if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q, want the time to pay off the debt", ra)
	}
	if got := e.up.Requests("ka", "m"); got != 1 {
		t.Errorf("upstream saw %d requests, want 1", got)
	}
}

// TestSharedLimitsFailOpen: with Redis unreachable the gateway keeps
// serving under its in-process limits (the spacing still holds locally).
func TestSharedLimitsFailOpen(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: shared.dir + "/nobody.sock",
		DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	lim, err := NewLimits(LimitsOptions{Client: rdb, OpTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	up := upstreamtest.NewServer(upstreamtest.Options{})
	upSrv := httptest.NewServer(up)
	gw := gateway.New(gateway.Options{Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
		return gateway.ClientKey{ID: "test-key", Name: "test", Enabled: true}, s == testClientKey
	}, SharedLimits: lim})
	srv := httptest.NewServer(gw)
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = up.Close()
		srv.Close()
		gw.Close()
		upSrv.Close()
	})
	e := &twoGateways{t: t, up: up, upURL: upSrv.URL, urls: [2]string{srv.URL, srv.URL}, hc: &http.Client{Transport: tr}}
	gw.Apply(gateway.Config{Connections: []gateway.Connection{
		// tpm room for three reservations of the default 4096 output tokens.
		e.conn("a", "ka", 0, limits.Overrides{MinTimeMs: ptr(300), TPM: ptr(int64(100000))})}})
	// Anchored before any dispatch: turn i comes at least i × 300 ms after sent,
	// so arrival i does too, however late the loopback delivers any of them.
	sent := time.Now()
	for i := range 3 {
		if r := e.post(t.Context(), 0); r.status != http.StatusOK {
			t.Fatalf("request %d: status %d (%s), want 200", i, r.status, r.code)
		}
	}
	arr := e.up.Arrivals("ka", "m")
	if len(arr) != 3 {
		t.Fatalf("upstream saw %d requests, want 3", len(arr))
	}
	for i, at := range arr {
		since := at.Sub(sent)
		t.Logf("arrival %d: %s after the first request was sent", i, since.Round(time.Millisecond))
		// The millisecond covers the limiter's float arithmetic.
		if want := time.Duration(i)*300*time.Millisecond - time.Millisecond; since < want {
			t.Errorf("arrival %d came %s after the first request was sent, want at least %s (local spacing of 300ms)", i, since, want)
		}
	}
}
