package gateway

import (
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// Error codes the gateway itself answers with, in `error.code`. The
// admission codes SEMAPHORE_TIMEOUT and SEMAPHORE_QUEUE_FULL come from
// package admission.
const (
	CodeMissingKey        = "MISSING_API_KEY"
	CodeInvalidKey        = "INVALID_API_KEY"
	CodeInvalidRequest    = "INVALID_REQUEST"
	CodeBodyTooLarge      = "REQUEST_TOO_LARGE"
	CodeModelNotFound     = "MODEL_NOT_FOUND"
	CodeNotFound          = "NOT_FOUND"
	CodeMethodNotAllowed  = "METHOD_NOT_ALLOWED"
	CodeNotReady          = "GATEWAY_NOT_READY"
	CodeUpstreamCooldown  = "UPSTREAM_COOLDOWN"
	CodeNoHealthy         = "NO_HEALTHY_CONNECTION"
	CodeExecutionTimeout  = "RATE_LIMIT_EXECUTION_TIMEOUT"
	CodeUpstreamError     = "UPSTREAM_UNAVAILABLE"
	CodeUpstreamStreamErr = "UPSTREAM_STREAM_ERROR"
	// CodeClusterUnavailable (503) means cluster mode runs fail-closed and
	// its shared admission store (Redis) cannot be reached.
	CodeClusterUnavailable = admission.CodeUnavailable
	// CodeShuttingDown (503, Retry-After 1) answers a request that was
	// queued, or arrived, after Drain, and one cut when the shutdown bound
	// ran out.
	CodeShuttingDown = admission.CodeShuttingDown
	// CodeRequestTimeout (408) answers a request whose body did not arrive
	// within the server's body read bound.
	CodeRequestTimeout = "REQUEST_TIMEOUT"
	// CodeAuthThrottled (429, Retry-After) answers a client address that
	// sent too many invalid keys, before its key is checked (AuthThrottle).
	CodeAuthThrottled = "AUTH_THROTTLED"
	// CodeOverloaded (503, Retry-After 1) answers a request whose body
	// would pass GATEHOUSE_MAX_BODY_BYTES_IN_FLIGHT.
	CodeOverloaded = "OVERLOADED"
	// CodeKeyDisabled (403) answers a disabled client key.
	CodeKeyDisabled = "KEY_DISABLED"
	// CodeModelNotAllowed (403) answers a model the key's models list does
	// not allow.
	CodeModelNotAllowed = "MODEL_NOT_ALLOWED"
	// CodeInternal (500) answers a request whose budget statement the
	// usage store refused (a constraint or range error): that request
	// alone fails.
	CodeInternal = "INTERNAL"
	// CodeUsageStoreUnavailable (503, Retry-After 1) answers a request with
	// day or money budgets while the usage store is unreachable and the
	// budgets fail closed (cluster mode).
	CodeUsageStoreUnavailable = "USAGE_STORE_UNAVAILABLE"
)

// apiError is a response the gateway makes itself; package wire encodes it
// in the route's dialect.
type apiError = wire.Error

// Header names the gateway sets on responses.
const (
	HeaderConnection = "X-Gatehouse-Connection"
	HeaderQueueMs    = "X-Gatehouse-Queue-Ms"
	HeaderGate       = wire.HeaderGate
)

// maxQuotedModel is the most characters of a client's model name an error
// message quotes: a 30 MB name must not come back in a 404.
const maxQuotedModel = 128

// quoteModel quotes a client's model name for an error message, cut to
// maxQuotedModel characters on a rune boundary ("…" marks the cut).
func quoteModel(model string) string {
	n := 0
	for i := range model {
		if n == maxQuotedModel {
			return strconv.Quote(model[:i] + "…")
		}
		n++
	}
	return strconv.Quote(model)
}

// ceilSeconds rounds d up to whole seconds, at least 1, for Retry-After.
func ceilSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}
