package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestQueueFull(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"model:c1:a": 1, "model:c1:b": 1})
	ha := mustAcquire(t, c, "connection:c1", "model:c1:a")
	hb := mustAcquire(t, c, "connection:c1", "model:c1:b")
	defer ha.Release()
	defer hb.Release()
	ctx, cancel := context.WithCancel(t.Context())
	// Two waiters on different models of one connection fill its queue of 2.
	wa := acquireAsync(ctx, c, Request{Gates: refs("connection:c1", "model:c1:a"), MaxQueueDepth: 2})
	wb := acquireAsync(ctx, c, Request{Gates: refs("connection:c1", "model:c1:b"), MaxQueueDepth: 2})
	waitFor(t, "2 waiting on connection:c1", func() bool { return gateStat(t, c, "connection:c1").Waiting == 2 })

	// Refused at once: the request is never parked. A parked one could only
	// end by admission, cancel or its minute-long MaxWait (a timeout, not a
	// full queue), and the counters would show it waiting.
	_, err := c.Acquire(t.Context(), Request{Gates: refs("connection:c1", "model:c1:a"), MaxWait: time.Minute, MaxQueueDepth: 2})
	var ae *Error
	if !errors.As(err, &ae) || !errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want SEMAPHORE_QUEUE_FULL", err)
	}
	if ae.Waited != 0 {
		t.Errorf("queue full after waiting %v, want it refused without a wait", ae.Waited)
	}
	if diff := cmp.Diff(GateRef{Level: "connection", Key: "connection:c1"}, ae.Gate); diff != "" {
		t.Errorf("gate mismatch (-want +got):\n%s", diff)
	}
	if s := gateStat(t, c, "connection:c1"); s.Waiting != 2 || s.QueueFull != 1 || s.Timeouts != 0 || s.Cancels != 0 {
		t.Errorf("connection waiting %d queueFull %d timeouts %d cancels %d, want 2, 1, 0, 0 (nothing enqueued)", s.Waiting, s.QueueFull, s.Timeouts, s.Cancels)
	}
	if s := gateStat(t, c, "model:c1:a"); s.Queued != 1 || s.Timeouts != 0 {
		t.Errorf("model:c1:a queued %d timeouts %d, want 1 (wa alone) and 0", s.Queued, s.Timeouts)
	}
	// A request that can be admitted at once is never refused for the queue.
	mustAcquire(t, c, "connection:c1", "model:c1:c").Release()
	cancel()
	recv(t, wa)
	recv(t, wb)
}

// TestCancelledBeatsQueueFull: a request whose context has already ended that
// meets a full queue is counted as a cancel, not as SEMAPHORE_QUEUE_FULL.
func TestCancelledBeatsQueueFull(t *testing.T) {
	t.Parallel()
	c := heldGate(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w := acquireAsync(ctx, c, Request{Gates: refs("connection:c1"), MaxQueueDepth: 1})
	waitFor(t, "1 waiting on connection:c1", func() bool { return gateStat(t, c, "connection:c1").Waiting == 1 })

	gone, stop := context.WithCancel(t.Context())
	stop()
	_, err := c.Acquire(gone, Request{Gates: refs("connection:c1"), MaxWait: time.Minute, MaxQueueDepth: 1})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrQueueFull) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if s := gateStat(t, c, "connection:c1"); s.Cancels != 1 || s.QueueFull != 0 {
		t.Errorf("cancels %d queueFull %d, want 1 and 0", s.Cancels, s.QueueFull)
	}
	if tot := c.Totals(); tot.Cancels != 1 || tot.QueueFull != 0 {
		t.Errorf("totals cancels %d queueFull %d, want 1 and 0", tot.Cancels, tot.QueueFull)
	}
	cancel()
	recv(t, w)
}
