package gateway

import (
	"slices"

	"github.com/google/go-cmp/cmp"
	"net/http"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestSessionInRequestLog: the request log names a request's session by the
// hash of its client key and session id, from each source in order, and
// never by the id itself.
func TestSessionInRequestLog(t *testing.T) {
	t.Parallel()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}})
	ctx := testCtx(t)
	body := `{"model":"glm-5","messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		hdr  []string
		body string
		id   string
	}{
		{[]string{session.HeaderClaudeCode, "cc-1"}, body, "cc-1"},
		{[]string{"session_id", "codex-1", session.HeaderClaudeCode, ""}, body, "codex-1"},
		{[]string{session.HeaderGatehouse, "gh-1", session.HeaderClaudeCode, "cc-2"}, body, "gh-1"},
		{nil, `{"model":"glm-5","prompt_cache_key":"pck-1","messages":[]}`, "pck-1"},
		{nil, `{"model":"glm-5","metadata":{"user_id":"user_1_session_2"},"messages":[]}`, "user_1_session_2"},
		{nil, body, ""},
	}
	for _, c := range cases {
		if r := e.post(ctx, "/v1/chat/completions", c.body, c.hdr...); r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	}
	waitFor(t, 5*time.Second, "every record", func() bool { return len(log.all()) == len(cases) })
	// Records may arrive out of order: compare them as sets.
	var want, got []string
	for i, rec := range log.all() {
		want = append(want, session.Hash("test-key", cases[i].id))
		got = append(got, rec.Session)
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sessions mismatch (-want +got):\n%s", diff)
	}
}
