package cluster

import (
	"errors"
	"fmt"
)

// CodeUnavailable is the `code` the gateway sends with 503 when the cluster
// runs fail-closed and Redis cannot be reached.
const CodeUnavailable = "CLUSTER_UNAVAILABLE"

var (
	// ErrUnavailable matches every *UnavailableError.
	ErrUnavailable = errors.New("cluster: " + CodeUnavailable)
	// ErrClosed is returned to requests still waiting when Close is called.
	ErrClosed = errors.New("cluster: controller closed")
)

// UnavailableError rejects a request because Redis cannot be reached and the
// controller runs FailClosed. errors.Is(err, ErrUnavailable) matches it.
type UnavailableError struct {
	// Cause is the Redis error that switched the controller to its fail
	// mode (for logs; never for clients).
	Cause error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("cluster: %s: shared admission store unreachable: %v", CodeUnavailable, e.Cause)
}

// Code returns CodeUnavailable. The gateway recognises the rejection by this
// method (an error in the chain with Code() == "CLUSTER_UNAVAILABLE"), so it
// needs no import of this package.
func (e *UnavailableError) Code() string { return CodeUnavailable }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Cause }

// Is matches ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
