package gateway

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gateway/inbound"
)

// copyBufSize is the buffer the response body is copied through, one per
// answer being relayed (pooled). A read returns what has arrived, and an SSE
// event or a chat answer is well under it; the pool of them is live heap,
// which GOGC=400 multiplies in RSS, so it is not larger.
const copyBufSize = 16 << 10

// maxErrorBody bounds how much of an upstream error response is kept to
// decide on failover and, if no other connection succeeds, to send back.
const maxErrorBody = 1 << 20

// errUpstreamDenied is the 502 of a connection whose host resolved to an
// address of GATEHOUSE_UPSTREAM_DENY when the gateway dialled it.
var errUpstreamDenied = &apiError{Status: http.StatusBadGateway, Code: CodeUpstreamError,
	Message: "the upstream's address is on the gateway's deny list (GATEHOUSE_UPSTREAM_DENY)"}

// errOverloaded answers a body beyond the bound on body bytes in flight.
var errOverloaded = &apiError{Status: http.StatusServiceUnavailable, Code: CodeOverloaded,
	Message: "the gateway holds as many request bodies as it may; retry shortly", RetryAfter: 1}

// reqBody is a client request body and, if the model was rewritten, the
// rewritten copy.
//
// Bodies are not pooled (package inbound says why).
type reqBody struct {
	inbound.Body
	alt      []byte // Raw rewritten for altM (and altUsage)
	altM     string
	altUsage bool // alt asks for stream usage
}

func (g *Gateway) getCopyBuf() *[]byte {
	if p, ok := g.copyBuf.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, copyBufSize)
	return &b
}
