package gateway

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// heldReleaseAdmitter admits at once with grants that look like a shared
// controller's (admission.ClusterInFlight) and whose Release blocks until the
// test lets it go, as a release's Redis round trip would, only longer.
type heldReleaseAdmitter struct {
	admission.Local
	releasing chan struct{} // a Release began
	let       chan struct{} // closed: releases return
}

type heldGrant struct{ a *heldReleaseAdmitter }

func (g heldGrant) Release() {
	g.a.releasing <- struct{}{}
	<-g.a.let
}
func (heldGrant) Waited() time.Duration         { return 0 }
func (heldGrant) InFlightAt(string) (int, bool) { return 0, false }
func (a *heldReleaseAdmitter) TryAcquire(admission.Request) (admission.Grant, bool) {
	return heldGrant{a}, true
}
func (a *heldReleaseAdmitter) Acquire(context.Context, admission.Request) (admission.Grant, error) {
	return heldGrant{a}, nil
}

// TestClusterAnswerBeforeRelease: a non-streaming answer through a shared
// controller's permit reaches the client, whole, while the permit's release
// is still under way — the client does not wait for the release's round
// trip — and the release still happens.
func TestClusterAnswerBeforeRelease(t *testing.T) {
	t.Parallel()
	adm := &heldReleaseAdmitter{
		Local:     admission.Local{C: admission.New(admission.Options{})},
		releasing: make(chan struct{}, 1),
		let:       make(chan struct{}),
	}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.Admission = adm })
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "glm-5")}})
	got := make(chan reply, 1)
	go func() { got <- e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false)) }()
	select {
	case <-adm.releasing:
	case <-time.After(20 * time.Second):
		t.Fatal("the permit was never released")
	}
	select {
	case r := <-got:
		if r.status != http.StatusOK || len(r.body) == 0 {
			t.Errorf("answer %d %q while the release was under way, want 200 with the body", r.status, r.body)
		}
	case <-time.After(20 * time.Second):
		t.Error("no answer while the permit's release was under way: the client waits for the release")
	}
	close(adm.let)
}
