package admission

import (
	"errors"
	"fmt"
	"time"
)

// Error codes carried by *Error; they are the `code` the gateway sends to clients.
const (
	// CodeTimeout: the request waited its whole MaxWait without being admitted.
	CodeTimeout = "SEMAPHORE_TIMEOUT"
	// CodeQueueFull: the request would have had to wait, and its queue was full.
	CodeQueueFull = "SEMAPHORE_QUEUE_FULL"
	// CodeShuttingDown: the controller was drained (the process is shutting
	// down), so the request's wait ended, or it was not let in, at once.
	CodeShuttingDown = "SHUTTING_DOWN"
)

// Sentinels matched by errors.Is against an *Error of the same code.
var (
	// ErrTimeout matches an *Error whose Code is CodeTimeout.
	ErrTimeout = errors.New("admission: timed out waiting for a slot")
	// ErrQueueFull matches an *Error whose Code is CodeQueueFull.
	ErrQueueFull = errors.New("admission: queue full")
	// ErrShuttingDown matches an *Error whose Code is CodeShuttingDown.
	ErrShuttingDown = errors.New("admission: shutting down")
)

// Error is a rejection by the controller: a timeout, a full queue, or a
// drained controller. A cancelled context is never an *Error; Acquire
// returns ctx.Err() then.
type Error struct {
	// Code is CodeTimeout, CodeQueueFull or CodeShuttingDown.
	Code string
	// Gate is the gate that blocked the request: for a timeout the full gate
	// it was parked on when its time ran out, for a full queue the gate whose
	// queue (Request.QueueKey) was full, for a drained controller the gate
	// it was parked on (or whose queue it would have joined).
	Gate GateRef
	// Waited is how long the request waited (0 for a full queue).
	Waited time.Duration
	// RetryAfter estimates when a retry could be admitted: over the full
	// gates of the request's path, the largest of (waiters that need the
	// gate + 1) × its mean hold time ÷ its cap.
	RetryAfter time.Duration
}

// Error implements error.
func (e *Error) Error() string {
	return fmt.Sprintf("admission: %s at gate %s after %s", e.Code, e.Gate.Key, e.Waited)
}

// Is reports whether target is the sentinel for e's code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrTimeout:
		return e.Code == CodeTimeout
	case ErrQueueFull:
		return e.Code == CodeQueueFull
	case ErrShuttingDown:
		return e.Code == CodeShuttingDown
	}
	return false
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up and at least 1,
// ready for an HTTP Retry-After header.
func (e *Error) RetryAfterSeconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}
