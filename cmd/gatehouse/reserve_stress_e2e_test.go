package main

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
	"github.com/gatehouse-dev/gatehouse/store"
)

// stressOutcome counts what the clients of the stress test saw.
type stressOutcome struct {
	mu                            sync.Mutex
	completed, hangUps, timeouts  int
	upstreamErrors, queueTimeouts int
}

// TestReservationsSettleOnceUnderStress: 96 requests, 12 at a time, over four
// connections of equal priority — one answers with usage, one 500s, one cuts
// its streams (resets), one never answers (execution bound 150 ms) — from a
// key whose gate admits 6 with a 100 ms wait; a third of the clients hang up
// after the first bytes and a third at a random moment. At the end no
// reservation is held on any replica (each was released or reconciled
// exactly once), the key's day tokens are at least the sum of its
// connections' (a known outcome settles both with one figure; an unknown one
// charges a connection only what the upstream can have processed), every
// completed answer was charged its usage and nothing beyond the reservations
// was charged.
func TestReservationsSettleOnceUnderStress(t *testing.T) {
	t.Parallel()
	resvModes(t, func(t *testing.T, rs func() *redisChild) {
		var key store.ClientKey
		var conns []store.Connection
		var secret string
		const budgets = `"tpd": 1000000000, "tpm": 100000000`
		e := newResvEnv(t, rs(), func(e *resvEnv) {
			for _, c := range []struct{ name, overrides string }{
				{"ok", `{` + budgets + `}`},
				{"fail", `{` + budgets + `}`},
				{"cut", `{` + budgets + `}`},
				{"slow", `{` + budgets + `, "executionMaxWaitMs": 150}`},
			} {
				conns = append(conns, e.conn(c.name, "sk-up-"+c.name, 0, c.overrides))
			}
			key, secret = e.key("k", `{`+budgets+`, "maxConcurrent": 6, "maxWaitMs": 100}`)
		})
		never := make(chan struct{})
		t.Cleanup(func() { close(never) })
		for k, b := range map[string]upstreamtest.Behavior{
			"sk-up-ok":   {UsageTokens: 30, Chunks: 3, ChunkInterval: 2 * time.Millisecond},
			"sk-up-fail": {Fail: "500"},
			"sk-up-cut":  {Fail: upstreamtest.FailStreamCut, Chunks: 4},
			"sk-up-slow": {Hold: never},
		} {
			if err := e.up.SetKeyBehavior(k, b); err != nil {
				t.Fatal(err)
			}
		}
		const n, workers, usage = 96, 12, 30
		est := resvEstimate(resvBody(true, 150), 150)
		rng := rand.New(rand.NewPCG(23, 1))
		type plan struct {
			stream bool
			mode   int // 0 read it all, 1 hang up after the first bytes, 2 hang up at a random moment
			after  time.Duration
		}
		plans := make(chan plan, n)
		for range n {
			plans <- plan{stream: rng.IntN(2) == 0, mode: rng.IntN(3), after: time.Duration(rng.IntN(30)) * time.Millisecond}
		}
		close(plans)
		var out stressOutcome
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for p := range plans {
					e.stressOne(w, secret, p.stream, p.mode, p.after, &out)
				}
			})
		}
		wg.Wait()
		e.settled()

		keyTokens := e.dayTokens(true, key.ID)
		var sum int64
		for _, c := range conns {
			sum += e.dayTokens(false, c.ID)
		}
		st := e.up.Stats()
		t.Logf("completed %d, hang-ups %d, client timeouts %d, upstream errors %d, queue timeouts %d; upstream requests %d; key tokens %d",
			out.completed, out.hangUps, out.timeouts, out.upstreamErrors, out.queueTimeouts, st.Total.Requests, keyTokens)
		// A known outcome settles the key and its connection with one figure;
		// an unknown one keeps the key's whole reservation but charges the
		// connection only what the upstream can have processed (at most the
		// same reservation).
		if keyTokens < sum {
			t.Errorf("key's day tokens %d < its connections' %d: a connection was charged more than the key", keyTokens, sum)
		}
		if low := int64(usage * out.completed); sum < low {
			t.Errorf("connections' day tokens %d < %d: %d completed answers of %d tokens each were not all charged", sum, low, out.completed, usage)
		}
		if low := int64(usage * out.completed); keyTokens < low {
			t.Errorf("key's day tokens %d < %d: %d completed answers of %d tokens each were not all charged", keyTokens, low, out.completed, usage)
		}
		// Each attempt the gateway dispatched is charged its usage (≤ the
		// reservation), the reservation, or nothing; the upstream saw all
		// of them but those a hang-up cut before they arrived.
		if high := est * (st.Total.Requests + int64(out.hangUps+out.timeouts)); keyTokens > high {
			t.Errorf("key's day tokens %d > %d: more than the reservations of every dispatch was charged", keyTokens, high)
		}
		if out.completed == 0 || out.hangUps+out.timeouts == 0 || out.upstreamErrors == 0 || st.ByKey["sk-up-fail"].Requests == 0 || st.ByKey["sk-up-cut"].Requests == 0 {
			t.Errorf("the mix did not happen (completed %d, hang-ups %d, timeouts %d, upstream errors %d, fail %d, cut %d)",
				out.completed, out.hangUps, out.timeouts, out.upstreamErrors, st.ByKey["sk-up-fail"].Requests, st.ByKey["sk-up-cut"].Requests)
		}
	})
}

// stressOne sends one request through gateway i and reads it as mode says.
func (e *resvEnv) stressOne(i int, secret string, stream bool, mode int, after time.Duration, out *stressOutcome) {
	ctx, cancel := context.WithCancel(e.t.Context())
	defer cancel()
	if mode == 2 {
		var stop func()
		ctx, stop = context.WithTimeout(ctx, after)
		defer stop()
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.urls[i%len(e.urls)]+"/v1/chat/completions", strings.NewReader(resvBody(stream, 150)))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := e.hc.Do(req)
	var rerr error
	if err == nil {
		if mode == 1 {
			_, _ = bufio.NewReader(resp.Body).ReadByte()
			cancel() // hang up after the first bytes
		} else {
			_, rerr = io.Copy(io.Discard, resp.Body)
		}
		_ = resp.Body.Close()
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	switch {
	case err != nil:
		out.timeouts++ // the client gave up before the answer began
	case resp.StatusCode == http.StatusTooManyRequests:
		out.queueTimeouts++
	case resp.StatusCode != http.StatusOK:
		out.upstreamErrors++
	case mode == 1:
		out.hangUps++
	case rerr != nil:
		out.timeouts++ // a cut stream, or the client's timeout while reading
	default:
		out.completed++ // read to its end: its usage was reported
	}
}
