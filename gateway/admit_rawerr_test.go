package gateway

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// rawErrAdmitter admits nothing right away and fails every wait with an
// error that is neither typed nor the client leaving, as go-redis hands
// back an OOM reply.
type rawErrAdmitter struct{ admission.Local }

func (rawErrAdmitter) TryAcquire(admission.Request) (admission.Grant, bool) { return nil, false }

func (rawErrAdmitter) Acquire(context.Context, admission.Request) (admission.Grant, error) {
	return nil, errors.New("OOM command not allowed when used memory > 'maxmemory'")
}

// TestAdmitterRawErrorNeverEmpty200: an admitter's raw error is answered
// as the shared store being away, 503 CLUSTER_UNAVAILABLE with
// Retry-After: 1, never as the client gone (issue 24, finding 5: an empty
// 200).
func TestAdmitterRawErrorNeverEmpty200(t *testing.T) {
	t.Parallel()
	adm := rawErrAdmitter{admission.Local{C: admission.New(admission.Options{})}}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Admission = adm })
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "glm-5")}})
	for _, stream := range []bool{false, true} {
		r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", stream))
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
			t.Fatalf("stream=%v: %d Retry-After %q %q, want 503 with Retry-After 1", stream, r.status, r.header.Get("Retry-After"), r.body)
		}
		checkShape(t, r, "openai", CodeClusterUnavailable)
	}
	if n := e.up.Stats().Total.Requests; n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
}
