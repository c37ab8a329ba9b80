package cluster

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// cmdStat is one line of INFO commandstats.
type cmdStat struct{ calls, usec int64 }

// commandStats reads INFO commandstats, by command name ("evalsha", "zadd").
func commandStats(t testing.TB, rdb redis.UniversalClient) map[string]cmdStat {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	out := make(map[string]cmdStat)
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s cmdStat
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	return out
}

// scriptCost is what Redis spent between two commandStats readings, per op:
// microseconds inside script calls and transactions (EVALSHA/EVAL, MULTI and
// EXEC, their commands included), script calls and transactions, and the
// commands they ran.
func scriptCost(before, after map[string]cmdStat, ops int) (usec, scripts, cmds float64) {
	for name, a := range after {
		d := cmdStat{a.calls - before[name].calls, a.usec - before[name].usec}
		switch name {
		case "evalsha", "eval", "evalsha_ro", "eval_ro", "exec":
			// EXEC's time includes the commands it ran, as a script's does.
			usec += float64(d.usec)
			scripts += float64(d.calls)
		case "multi":
			usec += float64(d.usec)
		case "info", "ping", "subscribe", "unsubscribe", "psubscribe", "client|setinfo", "client|setname", "hello", "script|load":
		default:
			cmds += float64(d.calls)
		}
	}
	n := float64(max(ops, 1))
	return usec / n, scripts / n, cmds / n
}

// commandMix lists the commands run between two readings, "zadd×4 …".
func commandMix(before, after map[string]cmdStat) string {
	var parts []string
	for name, a := range after {
		if d := a.calls - before[name].calls; d > 0 && name != "info" && name != "evalsha" && name != "multi" && name != "exec" {
			parts = append(parts, name+"×"+strconv.FormatInt(d, 10))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// countingHook counts the commands a client sends, by name (a pipeline
// counts each of its commands).
type countingHook struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.n[cmd.Name()]++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		for _, c := range cmds {
			h.n[c.Name()]++
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the counts so far and starts again. A new pooled
// connection's handshake (HELLO, CLIENT SETINFO) is not the request's.
func (h *countingHook) take() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.n
	h.n = make(map[string]int)
	delete(n, "hello")
	delete(n, "client")
	return n
}

// TestUncontendedScriptCalls: one uncontended request on a four-gate path
// costs exactly two Redis round trips and no script — one admit transaction
// (MULTI, one HMGET, a ZADD and a ZCARD per capped gate, EXEC), one release
// transaction (MULTI, a ZREM per leased gate, one HMGET, EXEC) — counted by
// hooks on the controller's client (the heartbeat runs on a long period
// here so that it cannot add a call). The uncapped gate takes no lease, so
// it costs no ZADD or ZREM.
func TestUncontendedScriptCalls(t *testing.T) {
	rdb := newClient(t, shared.sock)
	hook := &countingHook{n: make(map[string]int)}
	trips := &roundTrips{}
	rdb.AddHook(hook)
	rdb.AddHook(trips)
	c := newController(t, rdb, Options{Prefix: uniquePrefix(t), LeaseTTL: time.Hour, Recheck: time.Hour})
	c.SetCaps(map[string]int{benchKeys[0]: 1000, benchKeys[2]: 100, benchKeys[3]: 50})
	req := admission.Request{Gates: path(benchKeys...), MaxWait: 30 * time.Second, Client: "k1", Weight: 2}
	// Warm: the scripts are loaded (a first EVALSHA may answer NOSCRIPT).
	p, err := c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	hook.take()
	trips.take()
	before := commandStats(t, shared.client(t))

	p, err = c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	acquired, acquireTrips := hook.take(), trips.take()
	p.Release()
	released, releaseTrips := hook.take(), trips.take()

	wantAdmit := map[string]int{"multi": 1, "hmget": 1, "zadd": 3, "zcard": 3, "exec": 1}
	if !maps.Equal(acquired, wantAdmit) || acquireTrips != 1 {
		t.Errorf("acquire sent %v in %d round trips, want %v in one", acquired, acquireTrips, wantAdmit)
	}
	wantRelease := map[string]int{"multi": 1, "zrem": 3, "hmget": 1, "exec": 1}
	if !maps.Equal(released, wantRelease) || releaseTrips != 1 {
		t.Errorf("release sent %v in %d round trips, want %v in one", released, releaseTrips, wantRelease)
	}
	after := commandStats(t, shared.client(t))
	usec, scripts, cmds := scriptCost(before, after, 1)
	t.Logf("one uncontended request: %.0f script calls and transactions, %.0f commands inside them (%s), %.0f µs of Redis time",
		scripts, cmds, commandMix(before, after), usec)
}

// client is a plain client on the server, for reading its statistics.
func (s *redisServer) client(t testing.TB) *redis.Client {
	return newClient(t, s.sock)
}
