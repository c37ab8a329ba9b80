package cluster

import (
	"errors"
	"fmt"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
)

// CodeUnavailable is the `code` the gateway sends with 503 when the cluster
// runs fail-closed and Redis cannot be reached: admission.CodeUnavailable.
const CodeUnavailable = admission.CodeUnavailable

var (
	// ErrUnavailable matches every *UnavailableError. It is
	// admission.ErrUnavailable, the sentinel the gateway checks.
	ErrUnavailable = admission.ErrUnavailable
	// ErrClosed is returned to requests still waiting when Close is called.
	ErrClosed = errors.New("cluster: controller closed")
)

// UnavailableError rejects a request because Redis cannot be reached and the
// controller runs FailClosed. errors.Is(err, admission.ErrUnavailable)
// matches it.
type UnavailableError struct {
	// Cause is the Redis error that switched the controller to its fail
	// mode (for logs; never for clients).
	Cause error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("cluster: %s: shared admission store unreachable: %v", CodeUnavailable, e.Cause)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Cause }

// Is matches admission.ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == admission.ErrUnavailable }
