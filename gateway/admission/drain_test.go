package admission

import (
	"errors"
	"testing"
	"time"
)

// TestDrainEndsEveryWait: Drain ends every wait at once with SHUTTING_DOWN
// naming the gate it was parked on, later requests are refused the same way
// even where there is room, and the permit held through the drain releases
// its slot as usual.
func TestDrainEndsEveryWait(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"model:c1:m": 1, "connection:c2": 1})
	holder := mustAcquire(t, c, "connection:c1", "model:c1:m")
	holder2 := mustAcquire(t, c, "connection:c2")
	req := Request{Gates: refs("connection:c1", "model:c1:m")}
	req2 := Request{Gates: refs("connection:c2")}
	var waiting []<-chan result
	for range 20 {
		waiting = append(waiting, acquireAsync(t.Context(), c, req))
	}
	waiting = append(waiting, acquireAsync(t.Context(), c, req2))
	waitFor(t, "21 queued", func() bool {
		return gateStat(t, c, "model:c1:m").Queued == 20 && gateStat(t, c, "connection:c2").Queued == 1
	})
	c.Drain()
	c.Drain() // idempotent
	for i, ch := range waiting {
		r := recv(t, ch)
		var ae *Error
		if !errors.As(r.err, &ae) || !errors.Is(r.err, ErrShuttingDown) || r.p != nil {
			t.Fatalf("waiter %d: permit %v, error %v; want an *Error matching ErrShuttingDown", i, r.p, r.err)
		}
		want := "model:c1:m"
		if i == 20 {
			want = "connection:c2"
		}
		if ae.Code != CodeShuttingDown || ae.Gate.Key != want {
			t.Errorf("waiter %d: code %s at gate %s; want %s at %s", i, ae.Code, ae.Gate.Key, CodeShuttingDown, want)
		}
	}
	s := gateStat(t, c, "model:c1:m")
	if s.Queued != 0 || s.InFlight != 1 || s.Cancels != 20 || s.Timeouts != 0 || s.QueueFull != 0 {
		t.Errorf("after Drain: queued %d, in flight %d, cancels %d, timeouts %d, queue-full %d; want 0, 1, 20, 0, 0",
			s.Queued, s.InFlight, s.Cancels, s.Timeouts, s.QueueFull)
	}
	// /metrics reads the controller's totals, which outlive the gates.
	if got := c.Totals().Cancels; got != 21 {
		t.Errorf("controller-wide cancels after Drain = %d, want 21", got)
	}

	holder.Release()
	holder2.Release()
	if s := gateStat(t, c, "model:c1:m"); s.InFlight != 0 {
		t.Errorf("after the held permit's release: %d in flight, want 0", s.InFlight)
	}
	if p, ok := c.TryAcquire(req); ok || p != nil {
		t.Error("TryAcquire admitted after Drain")
	}
	p, err := c.Acquire(t.Context(), Request{Gates: req.Gates, MaxWait: time.Minute})
	var ae *Error
	if p != nil || !errors.As(err, &ae) || ae.Code != CodeShuttingDown || ae.Gate.Key != "connection:c1" {
		t.Errorf("Acquire after Drain: permit %v, error %v; want SHUTTING_DOWN at connection:c1 (its queue gate)", p, err)
	}
	if s := gateStat(t, c, "model:c1:m"); s.InFlight != 0 || s.Queued != 0 {
		t.Errorf("after the refusals: in flight %d, queued %d; want 0 and 0", s.InFlight, s.Queued)
	}
}

// TestDrainRefusesRequestWithoutGates: after Drain a request whose path has no
// gates at all is refused with SHUTTING_DOWN naming no gate (there is no queue
// it would have joined).
func TestDrainRefusesRequestWithoutGates(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.Drain()
	p, err := c.Acquire(t.Context(), Request{})
	var ae *Error
	if p != nil || !errors.As(err, &ae) || ae.Code != CodeShuttingDown || ae.Gate != (GateRef{}) {
		t.Fatalf("Acquire without gates after Drain: permit %v, error %v; want SHUTTING_DOWN naming no gate", p, err)
	}
}

// TestDrainNamesTheRequestsQueueGate: a request that names its queue gate
// (QueueKey) is refused after Drain naming that gate, not the connection's.
func TestDrainNamesTheRequestsQueueGate(t *testing.T) {
	t.Parallel()
	c := New(Options{})
	c.SetCaps(map[string]int{"connection:c1": 1, "model:c1:m": 1})
	c.Drain()
	_, err := c.Acquire(t.Context(), Request{Gates: refs("connection:c1", "model:c1:m"), QueueKey: "model:c1:m"})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeShuttingDown || ae.Gate.Key != "model:c1:m" {
		t.Fatalf("Acquire with QueueKey model:c1:m after Drain: error %v; want SHUTTING_DOWN at model:c1:m", err)
	}
}
