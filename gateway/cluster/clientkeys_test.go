package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// keyGateways is n gateway replicas in one process, each with its own Redis
// client, cluster controller and shared limits on one Redis and prefix, in
// front of one fake upstream, with client keys: key k authenticates with
// the secret "secret-" + k.ID.
type keyGateways struct {
	t      *testing.T
	prefix string
	up     *upstreamtest.Server
	upURL  string
	keys   []gateway.ClientKey
	gws    []*gateway.Gateway
	urls   []string
	hc     *http.Client
}

func newKeyGateways(t *testing.T, n int, upOpts upstreamtest.Options, keys ...gateway.ClientKey) *keyGateways {
	t.Helper()
	up := upstreamtest.NewServer(upOpts)
	upSrv := httptest.NewServer(up)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	e := &keyGateways{t: t, prefix: uniquePrefix(t), up: up, upURL: upSrv.URL, keys: keys, hc: &http.Client{Transport: tr}}
	byID := make(map[string]gateway.ClientKey, len(keys))
	for _, k := range keys {
		byID["secret-"+k.ID] = k
	}
	srvs := make([]*httptest.Server, n)
	for i := range n {
		rdb := newClient(t, shared.sock)
		// Long OpTimeouts: these tests count shares and caps, and a call slowed
		// past 500 ms by a loaded machine would turn a replica fail-open.
		ctrl := newController(t, rdb, Options{Prefix: e.prefix, ReplicaID: fmt.Sprintf("g%d", i), OpTimeout: 5 * time.Second})
		lim, err := NewLimits(LimitsOptions{Client: rdb, Prefix: e.prefix, OpTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		gw := gateway.New(gateway.Options{
			Authenticate: func(_ context.Context, s string) (gateway.ClientKey, bool) {
				k, ok := byID[s]
				return k, ok
			},
			Admission:    ctrl,
			SharedLimits: lim,
		})
		e.gws = append(e.gws, gw)
		srvs[i] = httptest.NewServer(gw)
		e.urls = append(e.urls, srvs[i].URL)
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

// apply gives every replica one connection "a" (upstream key "ka") serving
// models, with overrides o, and the client keys.
func (e *keyGateways) apply(o limits.Overrides, models ...string) {
	c := gateway.Connection{ID: "a", Name: "conn-a", Provider: "zai", APIStyle: "openai",
		BaseURL: e.upURL + "/v1", APIKey: "ka", Models: models, Enabled: true, Overrides: o}
	for _, gw := range e.gws {
		gw.Apply(gateway.Config{Connections: []gateway.Connection{c}, ClientKeys: e.keys})
	}
}

// post sends a chat completion for model through replica i as client key id.
func (e *keyGateways) post(ctx context.Context, i int, id, model string) reply {
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[i]+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		e.t.Error(err)
		return reply{}
	}
	req.Header.Set("Authorization", "Bearer secret-"+id)
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

func clientKey(id string, l limits.ClientKeyLimits) gateway.ClientKey {
	return gateway.ClientKey{ID: id, Name: "key-" + id, Enabled: true, Limits: l}
}

// TestKeyGateHoldsAcrossReplicas: a client key with maxConcurrent 2 sends
// 30 requests round-robin through three replicas; the upstream never has
// more than 2 of them at once (and has 2: the key gate, not something
// stricter, is what holds them), and every request is served.
func TestKeyGateHoldsAcrossReplicas(t *testing.T) {
	e := newKeyGateways(t, 3, upstreamtest.Options{Latency: 100 * time.Millisecond},
		clientKey("k2", limits.ClientKeyLimits{MaxConcurrent: ptr(2)}))
	e.apply(limits.Overrides{MaxWaitMs: ptr(60000)}, "m")
	const n = 30
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if r := e.post(t.Context(), i%3, "k2", "m"); r.status != http.StatusOK {
				t.Errorf("request %d via replica %d: status %d, want 200", i, i%3, r.status)
			}
		})
	}
	wg.Wait()
	if got := e.up.Requests("ka", "m"); got != n {
		t.Errorf("upstream served %d requests, want %d", got, n)
	}
	if got := e.up.Peak("ka", "m"); got != 2 {
		t.Errorf("peak in flight at the upstream = %d, want 2 (key:k2 cap 2 across three replicas)", got)
	}
}

// TestKeyRPMAcrossReplicas: a key with rpm 60 sends five requests at once,
// alternating between two replicas: they reach the upstream on the
// schedule of one spacing (arrival i at least i s after they were sent:
// anchored before any turn, so the loopback's delays can only lengthen it),
// because the turn lives in Redis. Another key,
// with no rpm, sent five requests meanwhile: all are served while the
// first key's next turn has not come (it is not spaced by the first key).
func TestKeyRPMAcrossReplicas(t *testing.T) {
	e := newKeyGateways(t, 2, upstreamtest.Options{},
		clientKey("slow", limits.ClientKeyLimits{RPM: ptr(60), MaxWaitMs: ptr(20000)}),
		clientKey("free", limits.ClientKeyLimits{}))
	e.apply(limits.Overrides{MaxWaitMs: ptr(20000)}, "m", "n")
	const n = 5
	sent := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if r := e.post(t.Context(), i%2, "slow", "m"); r.status != http.StatusOK {
				t.Errorf("slow request %d: status %d, want 200", i, r.status)
			}
		})
	}
	waitFor(t, 10*time.Second, "the slow key's first dispatch", func() bool { return e.up.Requests("ka", "m") >= 1 })
	before := e.up.Requests("ka", "m")
	var free sync.WaitGroup
	for i := range n {
		free.Go(func() {
			if r := e.post(t.Context(), i%2, "free", "n"); r.status != http.StatusOK {
				t.Errorf("free request %d: status %d, want 200", i, r.status)
			}
		})
	}
	free.Wait()
	if after := e.up.Requests("ka", "m"); after > before+1 {
		t.Errorf("the slow key dispatched %d more requests while the free key's %d were served, want ≤ 1: "+
			"the free key is being spaced", after-before, n)
	}
	wg.Wait()
	arr := e.up.Arrivals("ka", "m")
	if len(arr) != n {
		t.Fatalf("upstream saw %d slow-key requests, want %d", len(arr), n)
	}
	slices.SortFunc(arr, func(a, b time.Time) int { return a.Compare(b) })
	// The slack covers Redis's wall clock against this process's monotonic one.
	const slack = 5 * time.Millisecond
	for i, at := range arr {
		since := at.Sub(sent)
		t.Logf("slow request %d arrived %s after the requests were sent", i+1, since.Round(time.Millisecond))
		if want := time.Duration(i)*time.Second - slack; since < want {
			t.Errorf("slow request %d arrived %s after the requests were sent, want ≥ %s (key rpm 60 across both replicas)",
				i+1, since, want)
		}
	}
	if got := e.up.Requests("ka", "n"); got != n {
		t.Errorf("free key: upstream served %d, want %d", got, n)
	}
	rdb := newClient(t, shared.sock)
	if n, err := rdb.Exists(t.Context(), newKeyspace(e.prefix).turn("key:slow")).Result(); err != nil || n != 1 {
		t.Errorf("the slow key's turn in Redis: EXISTS = %d, %v; want 1 (the spacing is shared)", n, err)
	}
}

// TestKeyTPMAcrossReplicas: the tokens a key spends through one replica
// exhaust its tpm window on the other (429 RATE_LIMIT_TPM naming
// key-tpm:<id>), while another key is served there.
func TestKeyTPMAcrossReplicas(t *testing.T) {
	// 350 tokens against tpm 100: the debt outlasts any minute boundary
	// the test may cross.
	e := newKeyGateways(t, 2, upstreamtest.Options{UsageTokens: 350},
		clientKey("thrifty", limits.ClientKeyLimits{TPM: ptr(int64(100))}),
		clientKey("free", limits.ClientKeyLimits{}))
	e.apply(limits.Overrides{}, "m")
	if r := e.post(t.Context(), 0, "thrifty", "m"); r.status != http.StatusOK {
		t.Fatalf("replica 0: status %d (%s), want 200", r.status, r.code)
	}
	rdb := newClient(t, shared.sock)
	window := newKeyspace(e.prefix).tpm("key:thrifty")
	waitFor(t, 5*time.Second, "the key's tokens charged in Redis", func() bool {
		u, err := rdb.HGet(t.Context(), window, "u").Int64()
		return err == nil && u >= 350
	})
	r := e.post(t.Context(), 1, "thrifty", "m")
	if r.status != http.StatusTooManyRequests || r.code != gateway.CodeRateLimitTPM {
		t.Fatalf("replica 1: status %d code %q, want 429 %s", r.status, r.code, gateway.CodeRateLimitTPM)
	}
	if got := r.header.Get("X-Gatehouse-Gate"); got != "key-tpm:thrifty" {
		t.Errorf("gate = %q, want key-tpm:thrifty", got)
	}
	if r := e.post(t.Context(), 1, "free", "m"); r.status != http.StatusOK {
		t.Errorf("another key on replica 1: status %d (%s), want 200", r.status, r.code)
	}
	if got := e.up.Requests("ka", "m"); got != 2 {
		t.Errorf("upstream saw %d requests, want 2", got)
	}
}

// TestFairShareThroughGateways: the same shares end to end, through real
// HTTP: keys A (weight 1) and B (weight 3), twelve clients each on each of
// two replicas, sending requests in a loop at one cap-4 model gate whose
// upstream answers after a fixed latency. Of 200 completions B has 3 ± 20%
// times A's. Counted, not timed: the run stops after a number of
// completions. The first few completions are left out: they were admitted
// before any queue formed, whoever came first (up to the cap, 4), and with
// 200 in all that start alone moves the share by up to 8%.
func TestFairShareThroughGateways(t *testing.T) {
	const warm, total = 8, 200
	e := newKeyGateways(t, 2, upstreamtest.Options{Latency: 5 * time.Millisecond},
		clientKey("A", limits.ClientKeyLimits{Weight: ptr(1)}),
		clientKey("B", limits.ClientKeyLimits{Weight: ptr(3)}))
	e.apply(limits.Overrides{ModelConcurrency: map[string]int{"m": 4}, MaxWaitMs: ptr(60000)}, "m")
	var done atomic.Int64
	var got [2]atomic.Int64
	var wg sync.WaitGroup
	for i := range 24 {
		for k, id := range []string{"A", "B"} {
			wg.Go(func() {
				for done.Load() < warm+total {
					if r := e.post(t.Context(), i%2, id, "m"); r.status != http.StatusOK {
						t.Errorf("key %s via replica %d: status %d (%s), want 200", id, i%2, r.status, r.code)
						return
					}
					// Completions warm+1 … warm+total count; every client
					// has one more request out when they are done.
					if n := done.Add(1); n > warm && n <= warm+total {
						got[k].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	a, b := got[0].Load(), got[1].Load()
	t.Logf("%d completions through two replicas: A (weight 1) %d, B (weight 3) %d, B/A = %.2f", total, a, b, float64(b)/float64(max(a, 1)))
	if a == 0 || float64(b)/float64(a) < 2.4 || float64(b)/float64(a) > 3.6 {
		t.Errorf("B/A = %d/%d, want 3 ± 20%% (weights 1:3)", b, a)
	}
	if peak := e.up.Peak("ka", "m"); peak > 4 {
		t.Errorf("peak in flight at the upstream = %d, want ≤ 4 (model cap across both replicas)", peak)
	}
}
