package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// TestCancelledBeatsQueueFull: as in package admission, a request whose context
// has already ended that meets a full queue (real Redis) is counted as a cancel,
// not as SEMAPHORE_QUEUE_FULL, and nothing is queued for it.
func TestCancelledBeatsQueueFull(t *testing.T) {
	const conn, model = "connection:c1", "model:c1:m"
	reps := replicas(t, 2, map[string]int{model: 1}, Options{})
	a, b := reps[0], reps[1]
	req := admission.Request{Gates: path("provider:p", conn, model), MaxQueueDepth: 1}
	holder := mustTryAcquire(t, a, req)
	defer holder.Release()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	waiting := acquireAsync(ctx, a, req)
	waitFor(t, 5*time.Second, "first waiter queued", func() bool { return zcard(t, a.rdb, a.keys.queue(model)) == 1 })

	gone, stop := context.WithCancel(t.Context())
	stop()
	if _, err := b.Acquire(gone, req); !errors.Is(err, context.Canceled) || errors.Is(err, admission.ErrQueueFull) {
		t.Fatalf("Acquire with an ended context on a full queue = %v, want context.Canceled", err)
	}
	if got := b.Totals(); got != (admission.Totals{Cancels: 1}) {
		t.Errorf("totals %+v, want one cancel and no queue-full", got)
	}
	if n := zcard(t, a.rdb, a.keys.queue(model)); n != 1 {
		t.Errorf("queue holds %d, want 1 (nothing enqueued for the cancelled request)", n)
	}
	endWaiter(t, cancel, waiting)
}

// endWaiter cancels a waiter's context and checks that it ends with
// context.Canceled.
func endWaiter(t *testing.T, cancel context.CancelFunc, waiting <-chan result) {
	t.Helper()
	cancel()
	if r := recv(t, waiting, 5*time.Second); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter got %v, want context.Canceled", r.err)
	}
}
