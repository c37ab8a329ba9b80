package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// unreachableError is a shared admission store's fail-closed rejection, as
// gateway/cluster's *UnavailableError reports it: it matches
// admission.ErrUnavailable.
type unreachableError struct{}

func (unreachableError) Error() string        { return "store unreachable" }
func (unreachableError) Is(target error) bool { return target == admission.ErrUnavailable }

// sharedAdmitter stands in for a cluster controller: the in-process
// controller while "up", fail-closed rejections while "down".
type sharedAdmitter struct {
	admission.Local
	down     atomic.Bool
	acquires atomic.Int64
}

func (s *sharedAdmitter) Acquire(ctx context.Context, req admission.Request) (admission.Grant, error) {
	s.acquires.Add(1)
	if s.down.Load() {
		return nil, fmt.Errorf("shared: acquire: %w", unreachableError{})
	}
	return s.Local.Acquire(ctx, req)
}

func (s *sharedAdmitter) TryAcquire(req admission.Request) (admission.Grant, bool) {
	s.acquires.Add(1)
	if s.down.Load() {
		return nil, false
	}
	return s.Local.TryAcquire(req)
}

func TestOptionsAdmissionFailClosed(t *testing.T) {
	t.Parallel()
	shared := &sharedAdmitter{Local: admission.Local{C: admission.New(admission.Options{})}}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Admission = shared })
	oa := e.conn("c1", "key-c1", "glm-5")
	oa.Overrides = caps(0, map[string]int{"glm-5": 2}, 60000)
	an := e.conn("c2", "key-c2", "claude-x")
	an.APIStyle = "anthropic"
	e.gw.Apply(Config{Connections: []Connection{oa, an}})
	ctx := testCtx(t)

	if got := e.gate("model:c1:glm-5").Cap; got != 2 {
		t.Fatalf("model gate cap = %d, want 2: the caps reach Options.Admission", got)
	}
	tests := []struct {
		name, path, body, shape string
	}{
		{name: "openai", path: "/v1/chat/completions", body: chatBody("glm-5", false), shape: "openai"},
		{name: "openai stream", path: "/v1/chat/completions", body: chatBody("glm-5", true), shape: "openai"},
		{name: "anthropic", path: "/v1/messages", body: `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, shape: "anthropic"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shared.down.Store(true)
			r := e.post(ctx, tc.path, tc.body)
			if r.status != http.StatusServiceUnavailable {
				t.Fatalf("status %d while the store is down, want 503: %s", r.status, r.body)
			}
			checkShape(t, r, tc.shape, CodeClusterUnavailable)
			if got := r.header.Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After = %q, want 1", got)
			}
			if got := r.header.Get(HeaderGate); got != "" {
				t.Errorf("%s = %q, want none", HeaderGate, got)
			}

			shared.down.Store(false)
			if r := e.post(ctx, tc.path, tc.body); r.status != http.StatusOK {
				t.Errorf("status %d once the store is back, want 200: %s", r.status, r.body)
			}
		})
	}
	if shared.acquires.Load() == 0 {
		t.Error("Options.Admission was never asked")
	}
	if n := e.up.Requests("key-c1", "glm-5"); n != 2 {
		t.Errorf("upstream saw %d glm-5 requests, want 2 (none while the store was down)", n)
	}
	waitFor(t, 5*time.Second, "gates idle", e.allGatesIdle)
}

func TestClusterUnavailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "typed", err: unreachableError{}, want: true},
		{name: "sentinel", err: fmt.Errorf("x: %w", admission.ErrUnavailable), want: true},
		{name: "wrapped", err: fmt.Errorf("x: %w", unreachableError{}), want: true},
		{name: "joined", err: errors.Join(context.Canceled, unreachableError{}), want: true},
		{name: "context", err: context.Canceled, want: false},
		{name: "admission", err: &admission.Error{Code: admission.CodeTimeout}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := clusterUnavailable(tc.err); got != tc.want {
				t.Errorf("clusterUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
