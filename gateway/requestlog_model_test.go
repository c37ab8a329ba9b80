package gateway

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestRefusedRequestsLogTheirModel: a request refused because its key may not use
// the model (403 MODEL_NOT_ALLOWED) or because no connection serves it (404
// MODEL_NOT_FOUND, on an OpenAI and a Gemini route) leaves a request-log row with
// the model the client asked for, as a served one does.
func TestRefusedRequestsLogTheirModel(t *testing.T) {
	t.Parallel()
	keys := map[string]ClientKey{
		"sk-narrow-0000000000": {ID: "kn", Name: "narrow", Enabled: true, Limits: limits.ClientKeyLimits{Models: []string{"glm-4.7"}}},
		testClientKey:          {ID: "test-key", Name: "test", Enabled: true},
	}
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys), func(o *Options) { o.RequestLog = log })
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5", "glm-4.7"), e.geminiConn("g1", "k2", "gemini-x")},
		ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)
	send := []func() reply{
		func() reply {
			return e.post(ctx, "/v1/chat/completions", chatBody("glm-5", true), as("sk-narrow-0000000000")...)
		},
		func() reply { return e.post(ctx, "/v1/chat/completions", chatBody("no-such-model", false)) },
		func() reply { return e.gemini(ctx, http.MethodPost, "/v1beta/models/gemini-none:generateContent") },
		func() reply {
			return e.post(ctx, "/v1/chat/completions", chatBody("glm-4.7", false), as("sk-narrow-0000000000")...)
		},
	}
	for i, f := range send {
		f()
		// One at a time, so that the records come in the order sent.
		waitFor(t, 5*time.Second, "the request's record", func() bool { return len(log.all()) == i+1 })
	}
	type row struct {
		Model, Code string
		Status      int
		Stream      bool
	}
	var got []row
	for _, r := range log.all() {
		got = append(got, row{r.Model, r.Code, r.Status, r.Stream})
	}
	want := []row{
		{"glm-5", CodeModelNotAllowed, http.StatusForbidden, true},
		{"no-such-model", CodeModelNotFound, http.StatusNotFound, false},
		{"gemini-none", CodeModelNotFound, http.StatusNotFound, false},
		{"glm-4.7", "", http.StatusOK, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request log rows mismatch (-want +got):\n%s", diff)
	}
}
