package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/cluster"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Budget reservations end to end (issue 23, DESIGN "Budgets: reservations and
// spend"): real HTTP through gateways wired as serve wires them, over a real
// Postgres (the day counts) and, in cluster mode, two replicas sharing one
// redis-server (the minute windows) as well. Every scenario runs in both modes.

// resvPrompt makes a request body of about 270 bytes: a reservation of
// ⌈len ÷ 4⌉ + max_tokens.
var resvPrompt = strings.Repeat("x", 200)

// resvBody is a chat body with a ~200-byte prompt and max_tokens maxOut;
// stream and non-stream bodies have the same length, so the same estimate.
func resvBody(stream bool, maxOut int) string {
	s := `"stream":false`
	if stream {
		s = `"stream": true`
	}
	return `{"model":"glm-5","messages":[{"role":"user","content":"` + resvPrompt + `"}],` + s +
		`,"max_tokens":` + fmt.Sprint(maxOut) + `}`
}

// resvEstimate is the gateway's reservation for body.
func resvEstimate(body string, maxOut int) int64 { return int64((len(body)+3)/4 + maxOut) }

// resvEnv is one or two gateways over one Postgres database (and one Redis).
type resvEnv struct {
	t     *testing.T
	st    *store.Store
	up    *upstreamtest.Server
	upURL string
	gws   []*gateway.Gateway
	urls  []string
	hc    *http.Client
}

// newResvEnv makes the store and the fake upstream; setup creates the
// connections and keys in the store; then the gateways start (two sharing
// rs when rs is not nil, else one in-process gateway).
func newResvEnv(t *testing.T, rs *redisChild, setup func(e *resvEnv)) *resvEnv {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	st, up, upSrv := storeAndUpstream(t, logger)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	e := &resvEnv{t: t, st: st, up: up, upURL: upSrv.URL, hc: &http.Client{Transport: tr}}
	setup(e)
	opts := gateway.Options{Logger: logger, Usage: usageCounter{st: st}, KeyUsage: keyUsageCounter{st: st}}
	if rs == nil {
		gw, url := startWired(t, st, opts)
		e.gws, e.urls = append(e.gws, gw), append(e.urls, url)
		return e
	}
	prefix := fmt.Sprintf("resv%d", time.Now().UnixNano())
	for i := range 2 {
		rdb := redis.NewClient(&redis.Options{Network: "unix", Addr: rs.sock})
		ctrl, err := cluster.New(t.Context(), cluster.Options{Client: rdb, ReplicaID: fmt.Sprintf("r%d", i), Prefix: prefix, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		lim, err := cluster.NewLimits(cluster.LimitsOptions{Client: rdb, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = ctrl.Close(context.Background())
			_ = rdb.Close()
		})
		o := opts
		o.Admission, o.SharedLimits = ctrl, lim
		gw, url := startWired(t, st, o)
		e.gws, e.urls = append(e.gws, gw), append(e.urls, url)
	}
	return e
}

// conn creates an OpenAI-style connection serving glm-5 with upstream key key.
func (e *resvEnv) conn(name, key string, priority int, overrides string) store.Connection {
	e.t.Helper()
	c, err := e.st.CreateConnection(e.t.Context(), "tester", store.ConnectionInput{
		Name: name, Provider: "zai", APIStyle: "openai", BaseURL: e.upURL + "/v1", APIKey: key,
		Models: []string{"glm-5"}, Priority: priority, Enabled: true, RateLimitOverrides: json.RawMessage(overrides),
	})
	if err != nil {
		e.t.Fatalf("CreateConnection %s: %v", name, err)
	}
	return c
}

// key creates a client key with limits and returns it with its secret.
func (e *resvEnv) key(name, limits string) (store.ClientKey, string) {
	e.t.Helper()
	in := store.NewClientKeyInput(name)
	in.Limits = json.RawMessage(limits)
	k, secret, err := e.st.CreateClientKey(e.t.Context(), "tester", in)
	if err != nil {
		e.t.Fatalf("CreateClientKey %s: %v", name, err)
	}
	return k, secret
}

// resvReply is what a client got.
type resvReply struct {
	status int
	code   string
	via    string // X-Gatehouse-Connection
	gate   string // X-Gatehouse-Gate
	retry  string // Retry-After
	err    error
}

// post sends body through gateway i with secret and reads the whole answer.
func (e *resvEnv) post(ctx context.Context, i int, secret, body string) resvReply {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[i%len(e.urls)]+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return resvReply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.hc.Do(req)
	if err != nil {
		return resvReply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := resvReply{status: resp.StatusCode, via: resp.Header.Get(gateway.HeaderConnection), gate: resp.Header.Get("X-Gatehouse-Gate"), retry: resp.Header.Get("Retry-After"), err: err}
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

// dayTokens is the day's tokens of a key (keys) or a connection in Postgres.
func (e *resvEnv) dayTokens(keys bool, id string) int64 {
	e.t.Helper()
	get := e.st.UsageForDay
	if keys {
		get = e.st.ClientKeyUsageForDay
	}
	m, err := get(e.t.Context(), time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return m[id].Tokens
}

// settled waits until no gateway holds a reservation (each is released or
// reconciled exactly once: a second release would leave it below 0).
func (e *resvEnv) settled() {
	e.t.Helper()
	waitFor(e.t, 10*time.Second, "every reservation settled", func() bool {
		for _, gw := range e.gws {
			if gw.Reserved() != 0 {
				return false
			}
		}
		return true
	})
}

// parallel sends n copies of body at once, spread over the gateways, and
// returns the replies in the order they came back.
func (e *resvEnv) parallel(ctx context.Context, n int, secret, body string) <-chan resvReply {
	out := make(chan resvReply, n)
	for i := range n {
		go func() { out <- e.post(ctx, i, secret, body) }()
	}
	return out
}

// resvModes runs f in process (one gateway) and in cluster mode (two
// replicas, one redis-server), each on its own database.
func resvModes(t *testing.T, f func(t *testing.T, rs func() *redisChild)) {
	t.Run("in-process", func(t *testing.T) { f(t, func() *redisChild { return nil }) })
	t.Run("cluster", func(t *testing.T) { f(t, func() *redisChild { return startRedis(t) }) })
}

// TestReservedKeyBudgetsHoldUnderParallelLoad: a key with tpd 300 (then tpm
// 300) sends 20 requests at once, each reserving 218 tokens (a ~270-byte body
// ÷ 4 + max_tokens 150): exactly one is dispatched — the upstream's count says
// so — and the other 19 get 429 RATE_LIMIT_TPD (_TPM) at key-tpd:<id>
// (key-tpm:<id>) before dispatch. The one dispatched is charged its real usage.
func TestReservedKeyBudgetsHoldUnderParallelLoad(t *testing.T) {
	t.Parallel()
	for _, budget := range []string{"tpd", "tpm"} {
		t.Run(budget, func(t *testing.T) {
			resvModes(t, func(t *testing.T, rs func() *redisChild) {
				var key store.ClientKey
				var secret string
				e := newResvEnv(t, rs(), func(e *resvEnv) {
					e.conn("open", "sk-up-open", 0, `{}`)
					key, secret = e.key("budgeted", `{"`+budget+`": 300}`)
				})
				hold := make(chan struct{})
				t.Cleanup(func() { closeOnce(hold) })
				if err := e.up.SetDefault(upstreamtest.Behavior{Hold: hold, UsageTokens: 100}); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				body := resvBody(false, 150)
				replies := e.parallel(ctx, 20, secret, body)
				code, gate := gateway.CodeRateLimitTPD, "key-tpd:"+key.ID
				if budget == "tpm" {
					code, gate = gateway.CodeRateLimitTPM, "key-tpm:"+key.ID
				}
				for range 19 {
					if r := <-replies; r.err != nil || r.status != http.StatusTooManyRequests || r.code != code || r.gate != gate {
						t.Fatalf("a refused request = %d %s at %q (%v), want 429 %s at %s before dispatch", r.status, r.code, r.gate, r.err, code, gate)
					}
				}
				// The one dispatched may still be on its way to the upstream.
				if err := e.up.WaitUntil(ctx, func(s upstreamtest.Stats) bool { return s.Total.Requests >= 1 }); err != nil {
					t.Fatal(err)
				}
				if got := e.up.Stats().Total.Requests; got != 1 {
					t.Errorf("upstream got %d requests, want exactly 1 (20 × 218 tokens reserved against %s 300)", got, budget)
				}
				closeOnce(hold)
				if r := <-replies; r.err != nil || r.status != http.StatusOK {
					t.Fatalf("the dispatched request = %d %s (%v), want 200", r.status, r.code, r.err)
				}
				e.settled()
				if budget == "tpd" {
					if got := e.dayTokens(true, key.ID); got != 100 {
						t.Errorf("key's day tokens in Postgres = %d, want 100 (the real usage, not the 218 reserved)", got)
					}
				}
			})
		})
	}
}

// closeOnce closes ch unless it is closed.
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// TestReservedConnectionTPDSkips: a connection with tpd 300 takes one of 20
// parallel requests that reserve 218 tokens each; the other 19 skip to the
// next candidate (200 through it), none reaching the budgeted connection.
func TestReservedConnectionTPDSkips(t *testing.T) {
	t.Parallel()
	resvModes(t, func(t *testing.T, rs func() *redisChild) {
		var budgeted store.Connection
		var secret string
		e := newResvEnv(t, rs(), func(e *resvEnv) {
			budgeted = e.conn("budgeted", "sk-up-a", 10, `{"tpd": 300}`)
			e.conn("spare", "sk-up-b", 0, `{}`)
			_, secret = e.key("k", `{}`)
		})
		hold := make(chan struct{})
		t.Cleanup(func() { closeOnce(hold) })
		if err := e.up.SetKeyBehavior("sk-up-a", upstreamtest.Behavior{Hold: hold, UsageTokens: 100}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		replies := e.parallel(ctx, 20, secret, resvBody(false, 150))
		for range 19 {
			if r := <-replies; r.err != nil || r.status != http.StatusOK || r.via != "spare" {
				t.Fatalf("a request = %d %s via %q (%v), want 200 via spare", r.status, r.code, r.via, r.err)
			}
		}
		if err := e.up.WaitUntil(ctx, func(upstreamtest.Stats) bool { return e.up.Requests("sk-up-a", "glm-5") >= 1 }); err != nil {
			t.Fatal(err)
		}
		if got := e.up.Requests("sk-up-a", "glm-5"); got != 1 {
			t.Errorf("the connection with tpd 300 got %d requests, want exactly 1", got)
		}
		closeOnce(hold)
		if r := <-replies; r.err != nil || r.status != http.StatusOK || r.via != "budgeted" {
			t.Fatalf("the held request = %d %s via %q (%v), want 200 via budgeted", r.status, r.code, r.via, r.err)
		}
		e.settled()
		if got := e.dayTokens(false, budgeted.ID); got != 100 {
			t.Errorf("budgeted connection's day tokens = %d, want 100 (its one request's usage)", got)
		}
	})
}

// TestReservationChargedOnHangUp: a streaming client that reads the first
// chunk and hangs up before the usage event is charged its whole reservation
// (key and connection); a request that completes is charged its real usage.
func TestReservationChargedOnHangUp(t *testing.T) {
	t.Parallel()
	resvModes(t, func(t *testing.T, rs func() *redisChild) {
		var key store.ClientKey
		var conn store.Connection
		var secret string
		e := newResvEnv(t, rs(), func(e *resvEnv) {
			conn = e.conn("c", "sk-up", 0, `{"tpd": 1000000, "tpm": 1000000}`)
			key, secret = e.key("k", `{"tpd": 1000000, "tpm": 1000000}`)
		})
		last := make(chan struct{})
		t.Cleanup(func() { closeOnce(last) })
		if err := e.up.SetDefault(upstreamtest.Behavior{Chunks: 4, HoldLast: last, UsageTokens: 37}); err != nil {
			t.Fatal(err)
		}
		body := resvBody(true, 150)
		est := resvEstimate(body, 150)
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[0]+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(line, "data: ") {
			t.Fatalf("stream = %d, first line %q (%v); want 200 and a data line", resp.StatusCode, line, err)
		}
		cancel() // the client hangs up before the last chunk and the usage event
		_ = resp.Body.Close()
		e.settled()
		// The key keeps its whole reservation; the shared connection is
		// charged only what the upstream can have processed: the input
		// estimate and the output relayed before the hang-up (bytes ÷ 4),
		// at most the reservation.
		in := int64((len(body) + 3) / 4)
		k, c := e.dayTokens(true, key.ID), e.dayTokens(false, conn.ID)
		if k != est || c < in || c > est {
			t.Errorf("after a hang-up: key %d, connection %d tokens; want the reservation %d for the key, from %d (the input estimate) to %d for the connection", k, c, est, in, est)
		}
		conn0 := c

		// A completed request (stream, then not) is charged its usage.
		closeOnce(last)
		for _, stream := range []bool{true, false} {
			if r := e.post(t.Context(), 1, secret, resvBody(stream, 150)); r.err != nil || r.status != http.StatusOK {
				t.Fatalf("stream %v: %d %s (%v), want 200", stream, r.status, r.code, r.err)
			}
		}
		e.settled()
		if k, c := e.dayTokens(true, key.ID), e.dayTokens(false, conn.ID); k != est+74 || c != conn0+74 {
			t.Errorf("after two completed requests of 37 tokens: key %d, connection %d; want %d and %d", k, c, est+74, conn0+74)
		}
	})
}

// TestHungUpAbsurdRequestLeavesConnectionE2E: in process and across two
// replicas, a tenant's stream with an absurd max_tokens that hangs up
// mid-answer leaves a shared connection to the other tenants: its estimate
// is capped at maxOutputReserve and its unknown outcome charges the
// connection only what the upstream can have processed (before: the tpm
// window held ~1e18 tokens, paid off over a day; the tpd day was spent).
func TestHungUpAbsurdRequestLeavesConnectionE2E(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, overrides, maxTokens string }{
		{"tpm", `{"tpm": 100000}`, "999999999999999999"},
		{"tpd", `{"tpd": 1000000}`, "999950"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resvModes(t, func(t *testing.T, rs func() *redisChild) {
				var greedy, other string
				e := newResvEnv(t, rs(), func(e *resvEnv) {
					e.conn("c", "sk-up", 0, tc.overrides)
					_, greedy = e.key("greedy", `{}`)
					_, other = e.key("other", `{}`)
				})
				last := make(chan struct{})
				t.Cleanup(func() { closeOnce(last) })
				if err := e.up.SetDefault(upstreamtest.Behavior{Chunks: 4, HoldLast: last}); err != nil {
					t.Fatal(err)
				}
				body := `{"model":"glm-5","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":` + tc.maxTokens + `}`
				ctx, cancel := context.WithCancel(t.Context())
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[0]+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+greedy)
				resp, err := e.hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				if resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(line, "data: ") {
					t.Fatalf("stream = %d, first line %q (%v); want 200 and a data line", resp.StatusCode, line, err)
				}
				cancel()
				_ = resp.Body.Close()
				e.settled()
				closeOnce(last)
				if r := e.post(t.Context(), 1, other, resvBody(false, 100)); r.err != nil || r.status != http.StatusOK {
					t.Fatalf("another tenant's next request (through the other replica): %d %s at %q (%v), want 200", r.status, r.code, r.gate, r.err)
				}
			})
		})
	}
}
