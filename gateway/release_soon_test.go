package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// soonAdmitter admits at once with grants that look like a shared
// controller's (admission.ClusterInFlight, admission.SoonReleaser): Release
// blocks until the test ends, as a release's Redis round trip would, only
// longer; ReleaseSoon is counted.
type soonAdmitter struct {
	admission.Local
	soon     chan struct{} // a ReleaseSoon
	released chan struct{} // a Release began
	let      chan struct{} // closed: releases return
}

type soonGrant struct{ a *soonAdmitter }

func (g soonGrant) Release() {
	g.a.released <- struct{}{}
	<-g.a.let
}
func (g soonGrant) ReleaseSoon()                { g.a.soon <- struct{}{} }
func (soonGrant) Waited() time.Duration         { return 0 }
func (soonGrant) InFlightAt(string) (int, bool) { return 0, false }
func (a *soonAdmitter) TryAcquire(admission.Request) (admission.Grant, bool) {
	return soonGrant{a}, true
}
func (a *soonAdmitter) Acquire(context.Context, admission.Request) (admission.Grant, error) {
	return soonGrant{a}, nil
}

// TestClusterReleaseNotWaitedFor: a request through a shared controller's
// permit gives it back with ReleaseSoon, once per request, and never waits
// on Release's round trip: two requests one after the other are answered
// whole while every Release would block.
func TestClusterReleaseNotWaitedFor(t *testing.T) {
	t.Parallel()
	adm := &soonAdmitter{
		Local:    admission.Local{C: admission.New(admission.Options{})},
		soon:     make(chan struct{}, 4),
		released: make(chan struct{}, 4),
		let:      make(chan struct{}),
	}
	defer close(adm.let)
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Admission = adm })
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "glm-5")}})
	for i := range 2 {
		for _, stream := range []bool{false, true} {
			r := e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", stream))
			if r.status != http.StatusOK || len(r.body) == 0 {
				t.Fatalf("request %d (stream %v): %d %q, want 200 with the body", i, stream, r.status, r.body)
			}
			select {
			case <-adm.soon:
			default:
				t.Fatalf("request %d (stream %v) answered without giving its permit back (ReleaseSoon)", i, stream)
			}
		}
	}
	select {
	case <-adm.released:
		t.Error("a request called Release, which waits for the round trip, instead of ReleaseSoon")
	default:
	}
	if n := len(adm.soon); n != 0 {
		t.Errorf("%d more ReleaseSoon calls than requests", n)
	}
}
