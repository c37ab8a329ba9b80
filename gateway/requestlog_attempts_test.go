package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// lastRecord waits for the request log's n-th record and returns it.
func lastRecord(t *testing.T, log *recordedLog, n int) RequestRecord {
	t.Helper()
	waitFor(t, 10*time.Second, "record", func() bool { return len(log.all()) >= n })
	return log.all()[n-1]
}

// A request that failed over keeps both attempts (a's 500, then b's 200) and
// a's message; one served at once keeps none.
func TestRequestLogFailoverKeepsEveryAttempt(t *testing.T) {
	t.Parallel()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	e.pair(limits.Settings{})
	e.mustBehave("ka", upstreamtest.Behavior{Fail: "500", FailTimes: 1})
	ctx := testCtx(t)
	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-b")
	rec := lastRecord(t, log, 1)
	if len(rec.AttemptsDetail) != 2 {
		t.Fatalf("attempts = %+v, want two", rec.AttemptsDetail)
	}
	a, b := rec.AttemptsDetail[0], rec.AttemptsDetail[1]
	if a.ConnectionID != "a" || a.ConnectionName != "conn-a" || a.Status != 500 || a.Code != CodeUpstreamError {
		t.Errorf("first attempt = %+v, want a's 500 %s", a, CodeUpstreamError)
	}
	if b.ConnectionID != "b" || b.Status != 200 || b.Code != "" {
		t.Errorf("second attempt = %+v, want b's 200", b)
	}
	if rec.Status != 200 || rec.Code != "" || !strings.Contains(rec.UpstreamError, "injected failure 500") {
		t.Errorf("record: status %d code %q upstream error %q; want 200, no code, a's message", rec.Status, rec.Code, rec.UpstreamError)
	}

	expectVia(t, e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)), "conn-a")
	if rec := lastRecord(t, log, 2); rec.AttemptsDetail != nil || rec.UpstreamError != "" {
		t.Errorf("a request served at once keeps attempts %+v and error %q; want none", rec.AttemptsDetail, rec.UpstreamError)
	}
}

// An upstream failure answered as it was gets its attempt's code: a 429 when
// the only connection rate-limited is UPSTREAM_COOLDOWN, a 5xx UPSTREAM_UNAVAILABLE;
// a 400 relayed unchanged keeps the upstream's message and no code.
func TestRequestLogNamesUpstreamFailures(t *testing.T) {
	t.Parallel()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	e.gw.Apply(Config{Connections: []Connection{e.conn("a", "ka", "glm-5")}})
	ctx := testCtx(t)
	for i, tc := range []struct {
		fail   upstreamtest.Failure
		status int
		code   string
	}{{"503", 503, CodeUpstreamError}, {"400", 400, ""}, {"429", 429, CodeUpstreamCooldown}} {
		e.mustBehave("ka", upstreamtest.Behavior{Fail: tc.fail, FailTimes: 1})
		if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false)); r.status != tc.status {
			t.Fatalf("%s: status %d, want %d", tc.fail, r.status, tc.status)
		}
		rec := lastRecord(t, log, i+1)
		if rec.Code != tc.code || !strings.Contains(rec.UpstreamError, "injected failure "+string(tc.fail)) {
			t.Errorf("%s: code %q, upstream error %q; want %q and the upstream's message", tc.fail, rec.Code, rec.UpstreamError, tc.code)
		}
	}
}

// The upstream's message is kept without the connection's credential and
// without the text of the request, whatever the upstream echoes.
func TestRequestLogUpstreamErrorScrubbed(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":"bad credential `+r.Header.Get("Authorization")+` for `+string(body)+`"}`)
	}))
	defer echo.Close()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	c := e.conn("a", "opaque-credential-of-the-connection", "glm-5")
	c.BaseURL = echo.URL + "/v1"
	e.gw.Apply(Config{Connections: []Connection{c}})
	prompt := "tell me the secret recipe of grandmother's apple pie"
	body := `{"model":"glm-5","messages":[{"role":"user","content":"` + prompt + `"}]}`
	if r := e.post(testCtx(t), "/v1/chat/completions", body); r.status != 500 {
		t.Fatalf("status %d, want the upstream's 500", r.status)
	}
	rec := lastRecord(t, log, 1)
	if rec.UpstreamError == "" || strings.Contains(rec.UpstreamError, "opaque-credential") ||
		strings.Contains(rec.UpstreamError, "apple pie") || strings.Contains(rec.UpstreamError, "recipe") {
		t.Errorf("upstream error = %q, want it without the credential and the prompt", rec.UpstreamError)
	}
	if !strings.Contains(rec.UpstreamError, "bad credential") {
		t.Errorf("upstream error = %q, want the upstream's own words kept", rec.UpstreamError)
	}
}

// A client that leaves while queued is logged as gone (499 CLIENT_GONE), not
// as an upstream's answer.
func TestRequestLogClientGoneWhileQueued(t *testing.T) {
	t.Parallel()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, map[string]int{"glm-5": 1}, 60000)
	e.gw.Apply(Config{Connections: []Connection{c}})
	cancel, release, first, queued := e.holdAndQueue(t)
	cancel()
	<-queued
	rec := lastRecord(t, log, 1)
	if rec.Status != StatusClientGone || rec.Code != CodeClientGone || rec.UpstreamError != "" {
		t.Errorf("queued request left: status %d code %q error %q; want 499 %s", rec.Status, rec.Code, rec.UpstreamError, CodeClientGone)
	}
	release()
	<-first
}
