package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// roundTrips counts what a client writes to Redis: single commands and
// pipelines (one write each), and the script calls and transactions inside
// either. The coalescer sends the transactions of one batch as one
// MULTI/EXEC, so a transaction is counted by its HMGET of 'queued' (the
// admit and release transactions read it once each), not by EXEC.
type roundTrips struct {
	mu                      sync.Mutex
	singles, pipes, scripts int
	shared                  int // pipelines carrying more than one call
}

// take returns the writes so far and starts again.
func (h *roundTrips) take() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.singles + h.pipes
	h.singles, h.pipes, h.scripts, h.shared = 0, 0, 0, 0
	return n
}

// handshake reports whether cmds are a new pooled connection's handshake
// (HELLO, CLIENT SETINFO), which go-redis sends through the client's hooks
// when the pool dials: not a round trip of the call that needed the
// connection, and not of the steady state the tests count.
func handshake(cmds []redis.Cmder) bool {
	for _, c := range cmds {
		if n := c.Name(); n != "hello" && n != "client" {
			return false
		}
	}
	return len(cmds) > 0
}

func isCall(name string) bool { return name == "evalsha" || name == "eval" || name == "hmget" }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if handshake([]redis.Cmder{cmd}) {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		h.singles++
		if isCall(cmd.Name()) {
			h.scripts++
		}
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if handshake(cmds) {
			return next(ctx, cmds)
		}
		h.mu.Lock()
		h.pipes++
		calls := 0
		for _, c := range cmds {
			if isCall(c.Name()) {
				calls++
			}
		}
		h.scripts += calls
		if calls > 1 {
			h.shared++
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// TestCoalescedCalls: requests admitted and released at the same time share
// pipelines, yet each still makes its own admit and release call, no more
// permits than the cap are held at any moment (the holders set itself may
// count more for an instant: a newcomer's lease that its admit transaction
// takes back), and every lease is gone afterwards.
func TestCoalescedCalls(t *testing.T) {
	const (
		gate      = "connection:co"
		workers   = 16
		perWorker = 40
		gateCap   = 8
	)
	rdb := newClient(t, shared.sock)
	hook := &roundTrips{}
	rdb.AddHook(hook)
	c := newController(t, rdb, Options{Prefix: uniquePrefix(t), LeaseTTL: time.Hour, Recheck: time.Hour})
	c.SetCaps(map[string]int{gate: gateCap})
	req := admission.Request{Gates: path("global", gate), MaxWait: 30 * time.Second, Client: "k1"}
	// Warm: the scripts are loaded, so NOSCRIPT retries do not count below.
	p, err := c.Acquire(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	hook.take()

	var mu sync.Mutex
	held, peak := 0, 0
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				g, ok := c.TryAcquire(req)
				if !ok {
					continue
				}
				mu.Lock()
				held++
				peak = max(peak, held)
				mu.Unlock()
				mu.Lock()
				held--
				mu.Unlock()
				g.Release()
			}
		})
	}
	wg.Wait()
	if peak > gateCap {
		t.Errorf("%d permits held at once, cap %d", peak, gateCap)
	}
	if n := zcard(t, rdb, c.keys.holders(gate)); n != 0 {
		t.Errorf("holders = %d after every release, want 0", n)
	}
	if n := zcard(t, rdb, c.keys.holders("global")); n != 0 {
		t.Errorf("global holders = %d after every release, want 0", n)
	}
	tot := c.Totals()
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if tot.Admitted == 0 {
		t.Fatal("nothing admitted")
	}
	// Every admission is one admit call (or, on a full gate, the full
	// acquire's); every release one release call.
	if want := 2 * int(tot.Admitted); hook.scripts < want {
		t.Errorf("%d script calls for %d admissions, want at least %d", hook.scripts, tot.Admitted, want)
	}
	if hook.shared == 0 {
		t.Errorf("no pipeline carried two calls in %d calls (%d pipelines): nothing was coalesced", hook.scripts, hook.pipes)
	}
	t.Logf("%d admissions: %d script calls and transactions, %d pipelines, %d of them shared", tot.Admitted, hook.scripts, hook.pipes, hook.shared)
}

// TestBatchedTransactionsFailApart: two transactions sent in one batch, one
// with a command Redis refuses when it is queued (which discards the whole
// MULTI/EXEC): the other still runs, with its own reply, and the refused one
// keeps its own error.
func TestBatchedTransactionsFailApart(t *testing.T) {
	rdb := newClient(t, shared.sock)
	p := newCoalescer(rdb, context.Background(), 5*time.Second)
	ctx := t.Context()
	key := uniquePrefix(t) + ":apart"
	bad := redis.NewIntCmd(ctx, "zadd", key) // wrong number of arguments: refused when queued
	good := redis.NewIntCmd(ctx, "zadd", key, 1, "m")
	count := redis.NewIntCmd(ctx, "zcard", key)
	p.exec([]*call{{tx: []redis.Cmder{bad}}, {tx: []redis.Cmder{good, count}}})
	if err := good.Err(); err != nil || good.Val() != 1 {
		t.Errorf("the sound transaction's ZADD = %d, %v; want 1, nil", good.Val(), err)
	}
	if err := count.Err(); err != nil || count.Val() != 1 {
		t.Errorf("the sound transaction's ZCARD = %d, %v; want 1, nil", count.Val(), err)
	}
	if err := bad.Err(); err == nil {
		t.Error("the refused command has no error")
	}
	if n := zcard(t, rdb, key); n != 1 {
		t.Errorf("ZCARD = %d after the batch, want 1", n)
	}
}
