package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/cluster"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// cutter dials Postgres for a pool until it is cut: then every connection
// it made is closed and every new dial is refused, as when the database
// host goes away. Deterministic: no timing is involved.
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutter) setCut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// TestClusterBudgetsFailClosedE2E: two replicas sharing one Redis, whose
// usage store (Postgres) becomes unreachable. By default (closed) a request
// whose path has a day budget gets 503 USAGE_STORE_UNAVAILABLE with
// Retry-After 1 on either replica and nothing is dispatched — replicas
// cannot see each other's memory, so counting there would let each spend
// the whole budget; a path without one is served. With
// GATEHOUSE_BUDGET_FAIL=open (BudgetFailClosed false) each replica serves
// from memory. (Before: each replica counted in memory and together they
// spent far past the budget.)
func TestClusterBudgetsFailClosedE2E(t *testing.T) {
	t.Parallel()
	for _, closed := range []bool{true, false} {
		t.Run(fmt.Sprintf("closed=%v", closed), func(t *testing.T) {
			t.Parallel()
			logger := slog.New(slog.DiscardHandler)
			dbURL := storetest.URL(t)
			secret := bytes.Repeat([]byte{0x42}, store.SecretKeySize)
			pool, err := pgxpool.New(t.Context(), dbURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			st, err := store.New(pool, secret, logger)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := pgxpool.ParseConfig(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			cut := &cutter{}
			cfg.ConnConfig.DialFunc = cut.dial
			usagePool, err := pgxpool.NewWithConfig(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(usagePool.Close)
			ust, err := store.New(usagePool, secret, logger)
			if err != nil {
				t.Fatal(err)
			}
			up := upstreamtest.NewServer(upstreamtest.Options{})
			upSrv := httptest.NewServer(up)
			t.Cleanup(func() {
				_ = up.Close()
				upSrv.Close()
			})
			tr := &http.Transport{MaxIdleConnsPerHost: 16}
			t.Cleanup(tr.CloseIdleConnections)
			e := &resvEnv{t: t, st: st, up: up, upURL: upSrv.URL, hc: &http.Client{Transport: tr}}
			e.conn("c", "sk-up", 0, `{"tpd": 1000000}`)
			_, budgeted := e.key("budgeted", `{"tpd": 1000000}`)
			_, plain := e.key("plain", `{}`)
			free, err := st.CreateConnection(t.Context(), "tester", store.ConnectionInput{
				Name: "free", Provider: "zai", APIStyle: "openai", BaseURL: e.upURL + "/v1", APIKey: "sk-free",
				Models: []string{"glm-6"}, Enabled: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			_ = free

			rs := startRedis(t)
			prefix := fmt.Sprintf("bfail%d", time.Now().UnixNano())
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
				gw, url := startWired(t, st, gateway.Options{Logger: logger, Usage: usageCounter{st: ust}, KeyUsage: keyUsageCounter{st: ust},
					Admission: ctrl, SharedLimits: lim, BudgetFailClosed: closed})
				e.gws, e.urls = append(e.gws, gw), append(e.urls, url)
			}
			ctx := t.Context()
			if r := e.post(ctx, 0, budgeted, resvBody(false, 100)); r.err != nil || r.status != http.StatusOK {
				t.Fatalf("before the outage: %d %s (%v), want 200", r.status, r.code, r.err)
			}
			e.settled()
			served := e.up.Requests("sk-up", "glm-5")

			cut.setCut()
			for i := range 4 {
				r := e.post(ctx, i, budgeted, resvBody(false, 100))
				want, code := http.StatusOK, ""
				if closed {
					want, code = http.StatusServiceUnavailable, gateway.CodeUsageStoreUnavailable
				}
				if r.err != nil || r.status != want || r.code != code {
					t.Errorf("replica %d, store unreachable: %d %q (%v), want %d %q", i%2, r.status, r.code, r.err, want, code)
				}
				if closed && r.retry != "1" {
					t.Errorf("replica %d: Retry-After %q, want 1", i%2, r.retry)
				}
			}
			// A path without day or money budgets does not need the store.
			if r := e.post(ctx, 1, plain, `{"model":"glm-6","messages":[{"role":"user","content":"hi"}]}`); r.err != nil || r.status != http.StatusOK {
				t.Errorf("no day budget on the path: %d %s (%v), want 200", r.status, r.code, r.err)
			}
			e.settled()
			dispatched := e.up.Requests("sk-up", "glm-5") - served
			if closed && dispatched != 0 {
				t.Errorf("%d requests dispatched to the budgeted connection while the store was unreachable, want 0", dispatched)
			}
			if !closed && dispatched != 4 {
				t.Errorf("fail open: %d dispatched, want 4 (counted in memory)", dispatched)
			}
		})
	}
}

// TestDeletedKeySettledQuietlyE2E: a client key deleted while its request
// is in flight has its settlement dropped quietly against a real Postgres
// (its usage rows went with it): nothing is logged at warning level, and the
// usage store stays in use — another key's next request is counted in
// Postgres, not in memory. Before, the foreign-key error switched every
// budget of the replica to memory for 5 s.
func TestDeletedKeySettledQuietlyE2E(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, up, upSrv := storeAndUpstream(t, slog.New(slog.DiscardHandler))
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	e := &resvEnv{t: t, st: st, up: up, upURL: upSrv.URL, hc: &http.Client{Transport: tr}}
	e.conn("c", "sk-up", 0, `{"tpd": 1000000}`)
	doomed, doomedSecret := e.key("doomed", `{"tpd": 1000000}`)
	other, otherSecret := e.key("other", `{"tpd": 1000000}`)
	gw, url := startWired(t, st, gateway.Options{Logger: logger, Usage: usageCounter{st: st}, KeyUsage: keyUsageCounter{st: st}})
	e.gws, e.urls = []*gateway.Gateway{gw}, []string{url}
	last := make(chan struct{})
	t.Cleanup(func() { closeOnce(last) })
	if err := up.SetDefault(upstreamtest.Behavior{Chunks: 4, HoldLast: last, UsageTokens: 37}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(resvBody(true, 150)))
	req.Header.Set("Authorization", "Bearer "+doomedSecret)
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); resp.StatusCode != http.StatusOK || err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("stream = %d, first line %q (%v)", resp.StatusCode, line, err)
	}
	if err := st.DeleteClientKey(ctx, "tester", doomed.ID, 0); err != nil {
		t.Fatal(err)
	}
	closeOnce(last) // the answer ends with its usage: the deleted key's settlement
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatal(err)
	}
	e.settled()
	if r := e.post(ctx, 0, otherSecret, resvBody(false, 150)); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("another key's request: %d %s (%v)", r.status, r.code, r.err)
	}
	e.settled()
	if got := logs.String(); got != "" {
		t.Errorf("warnings logged, want none:\n%s", got)
	}
	if got := e.dayTokens(true, other.ID); got != 37 {
		t.Errorf("the other key's day tokens in Postgres = %d, want 37 (the store still in use)", got)
	}
}
