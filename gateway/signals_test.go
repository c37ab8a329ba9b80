package gateway

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// signalKeys: R has an rpm, T a tpm and a tpd (tpm the tighter), D a tpd
// tighter than its tpm, N no rate at all.
func signalKeys() map[string]ClientKey {
	return map[string]ClientKey{
		"sk-r": {ID: "kr", Name: "r", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(600000)}},
		"sk-t": {ID: "kt", Name: "t", Enabled: true, Limits: limits.ClientKeyLimits{TPM: ptr(int64(100000)), TPD: ptr(int64(10000000))}},
		"sk-d": {ID: "kd", Name: "d", Enabled: true, Limits: limits.ClientKeyLimits{TPM: ptr(int64(1000000)), TPD: ptr(int64(1000)),
			Priority: ptr("batch"), Weight: ptr(2)}},
		"sk-n": {ID: "kn", Name: "n", Enabled: true},
	}
}

func newSignalEnv(t *testing.T) *env {
	t.Helper()
	keys := signalKeys()
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	e.gw.Apply(Config{Connections: []Connection{e.conn("c1", "k1", "glm-5")}, ClientKeys: keyConfig(keys)})
	return e
}

// openAIResetForm is OpenAI's reset duration: "6m0s", "20ms", "1s".
var openAIResetForm = regexp.MustCompile(`^([0-9]+h)?([0-9]+m)?([0-9]+s|[0-9]+ms)$`)

func headerInt(t *testing.T, r reply, name string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r.header.Get(name), 10, 64)
	if err != nil {
		t.Fatalf("%s = %q: %v (headers %v)", name, r.header.Get(name), err, r.header)
	}
	return n
}

// TestRateLimitHeadersTellTheRPMTurn: a key's rpm is a spacing, so its
// X-RateLimit-Remaining-Requests is 1 when its next turn is now and 0 otherwise,
// and X-RateLimit-Reset-Requests the time until that turn (OpenAI's form). With
// rpm 6, the answer to a request says 0 left and a reset of up to 10 s — never
// "5 remaining" when the next request must wait 10 s — and so does the 429 of a
// request that could not wait for its turn, with the same time as Retry-After.
// With rpm 600000 (a turn every 100 µs), an answer read once the turn has come
// says 1 and 0s. A key without rates gets none of the headers.
func TestRateLimitHeadersTellTheRPMTurn(t *testing.T) {
	t.Parallel()
	keys := signalKeys()
	keys["sk-six"] = ClientKey{ID: "k6", Name: "six", Enabled: true, Limits: limits.ClientKeyLimits{RPM: ptr(6)}}
	e := newEnv(t, upstreamtest.Options{}, withKeys(keys))
	c := e.conn("c1", "k1", "glm-5")
	c.Overrides = caps(0, nil, 200) // a turn 10 s away is past the 200 ms wait bound
	e.gw.Apply(Config{Connections: []Connection{c}, ClientKeys: keyConfig(keys)})
	ctx := testCtx(t)

	resetOf := func(r reply) time.Duration {
		t.Helper()
		v := r.header.Get("X-RateLimit-Reset-Requests")
		if !openAIResetForm.MatchString(v) {
			t.Fatalf("reset %q is not in OpenAI's form", v)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("reset %q: %v", v, err)
		}
		return d
	}
	r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-six")...)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if l, left := headerInt(t, r, "X-RateLimit-Limit-Requests"), headerInt(t, r, "X-RateLimit-Remaining-Requests"); l != 6 || left != 0 {
		t.Errorf("after a request with rpm 6: limit %d, remaining %d; want 6 and 0 (the next turn is 10 s away)", l, left)
	}
	if d := resetOf(r); d < time.Second || d > 10*time.Second {
		t.Errorf("after a request with rpm 6: reset %v, want the time to the next turn (up to 10s)", d)
	}
	r = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-six")...)
	if r.status != http.StatusTooManyRequests || r.errorCode(t) != CodeRateLimitRPM {
		t.Fatalf("second request: %d %s, want 429 %s", r.status, r.body, CodeRateLimitRPM)
	}
	if left := headerInt(t, r, "X-RateLimit-Remaining-Requests"); left != 0 {
		t.Errorf("429: remaining %d, want 0", left)
	}
	ra := headerInt(t, r, "Retry-After")
	if d := resetOf(r); d < time.Second || d > 10*time.Second || d > time.Duration(ra)*time.Second {
		t.Errorf("429: reset %v with Retry-After %d s, want the time to the turn, no later than Retry-After", d, ra)
	}

	// rpm 600000: once the turn after a request has come, the key may send one.
	if r := e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-r")...); r.status != http.StatusOK {
		t.Fatalf("rpm 600000: status %d: %s", r.status, r.body)
	}
	waitFor(t, 5*time.Second, "the next turn of a key with rpm 600000", func() bool {
		r := e.send(ctx, http.MethodGet, "/v1/gatehouse/limits", "", as("sk-r")...)
		return r.header.Get("X-RateLimit-Remaining-Requests") == "1" && r.header.Get("X-RateLimit-Reset-Requests") == "0s"
	})

	// A key without rates gets none of the headers, and X-Gatehouse-Queue-Ms.
	r = e.post(ctx, "/v1/chat/completions", chatBody("glm-5", false), as("sk-n")...)
	if r.header.Get("X-RateLimit-Limit-Requests") != "" || r.header.Get("X-RateLimit-Remaining-Tokens") != "" || r.header.Get(HeaderQueueMs) == "" {
		t.Errorf("key without rates: headers %v", r.header)
	}
}

// TestRateLimitHeadersTokens: X-RateLimit-*-Tokens describe the tightest of
// a key's tpm and tpd, and Remaining-Tokens falls as the upstream's usage is
// charged (30 tokens a request from the fake upstream; each request, with
// max_tokens 20, reserves 40 while it runs).
func TestRateLimitHeadersTokens(t *testing.T) {
	t.Parallel()
	e := newSignalEnv(t)
	for _, tc := range []struct {
		secret string
		limit  int64
	}{{"sk-t", 100000}, {"sk-d", 1000}} {
		var got []int64
		for range 4 {
			r := e.post(testCtx(t), "/v1/chat/completions", chatBodyMax("glm-5", 20), as(tc.secret)...)
			if r.status != http.StatusOK {
				t.Fatalf("%s: status %d: %s", tc.secret, r.status, r.body)
			}
			if l := headerInt(t, r, "X-RateLimit-Limit-Tokens"); l != tc.limit {
				t.Errorf("%s: token limit %d, want the tighter budget %d", tc.secret, l, tc.limit)
			}
			if reset := r.header.Get("X-RateLimit-Reset-Tokens"); !openAIResetForm.MatchString(reset) {
				t.Errorf("%s: reset %q is not in OpenAI's form", tc.secret, reset)
			}
			got = append(got, headerInt(t, r, "X-RateLimit-Remaining-Tokens"))
		}
		t.Logf("%s remaining tokens: %v", tc.secret, got)
		for i := 1; i < len(got); i++ {
			if got[i] >= got[i-1] {
				t.Errorf("%s: remaining tokens %v, want them to fall with each request", tc.secret, got)
				break
			}
		}
		if last := got[len(got)-1]; last > tc.limit-90 {
			t.Errorf("%s: remaining %d after 4 requests of 30 tokens, want at most %d", tc.secret, last, tc.limit-90)
		}
	}
}

// TestRateLimitHeadersOnRefusals: an answer the gateway gives itself (a
// model the key may not reach: 404) carries the key's headers and
// X-Gatehouse-Queue-Ms too.
func TestRateLimitHeadersOnRefusals(t *testing.T) {
	t.Parallel()
	e := newSignalEnv(t)
	r := e.post(testCtx(t), "/v1/chat/completions", chatBody("no-such-model", false), as("sk-r")...)
	if r.status != http.StatusNotFound || r.header.Get("X-RateLimit-Limit-Requests") != "600000" || r.header.Get(HeaderQueueMs) != "0" {
		t.Errorf("404: status %d headers %v", r.status, r.header)
	}
	r = e.post(testCtx(t), "/v1/chat/completions", chatBody("glm-5", false), append(as("sk-r"), HeaderPriority, "urgent")...)
	if r.status != http.StatusBadRequest || r.header.Get("X-RateLimit-Remaining-Requests") == "" || r.header.Get(HeaderQueueMs) != "0" {
		t.Errorf("400: status %d headers %v", r.status, r.header)
	}
}

// TestGatehouseLimits: GET /v1/gatehouse/limits answers the calling key's
// limits exactly as configured (the API's "limits" object), its class, its
// budgets with what is left and when they reset, and its load.
func TestGatehouseLimits(t *testing.T) {
	t.Parallel()
	e := newSignalEnv(t)
	if r := e.post(testCtx(t), "/v1/chat/completions", chatBodyMax("glm-5", 20), as("sk-d")...); r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	r := e.send(testCtx(t), http.MethodGet, route.LimitsPath, "", as("sk-d")...)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %q: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var got struct {
		ID, Name, Priority string
		Limits             json.RawMessage
		Budgets            map[string]struct {
			Limit, Remaining int64
			ResetAt          time.Time
			ResetIn          string
		}
		InFlight, Queued int
	}
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	want, _ := json.Marshal(signalKeys()["sk-d"].Limits)
	if got.ID != "kd" || got.Name != "d" || got.Priority != "batch" || string(got.Limits) != string(want) {
		t.Errorf("key %s %s %s limits %s, want kd d batch %s", got.ID, got.Name, got.Priority, got.Limits, want)
	}
	tpd, ok := got.Budgets["tpd"]
	if !ok || tpd.Limit != 1000 || tpd.Remaining != 970 || !tpd.ResetAt.After(time.Now()) || !openAIResetForm.MatchString(tpd.ResetIn) {
		t.Errorf("tpd budget %+v (ok %v), want limit 1000, 970 left after one request of 30 tokens", tpd, ok)
	}
	if _, ok := got.Budgets["tpm"]; !ok || len(got.Budgets) != 2 {
		t.Errorf("budgets %v, want tpm and tpd", got.Budgets)
	}
	if got.InFlight != 0 || got.Queued != 0 {
		t.Errorf("load %d in flight, %d queued, want none", got.InFlight, got.Queued)
	}
	// A key with nothing set: empty limits, standard, no budgets.
	r = e.send(testCtx(t), http.MethodGet, route.LimitsPath, "", as("sk-n")...)
	if r.status != http.StatusOK || r.body != `{"id":"kn","name":"n","limits":{},"priority":"standard","budgets":{},"inFlight":0,"queued":0}`+"\n" {
		t.Errorf("plain key: %d %s", r.status, r.body)
	}
	// The route wants a client key, and GET.
	if r := e.send(testCtx(t), http.MethodGet, route.LimitsPath, ""); r.status != http.StatusUnauthorized {
		t.Errorf("no key: %d", r.status)
	}
	if r := e.send(testCtx(t), http.MethodPost, route.LimitsPath, "{}", as("sk-n")...); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", r.status)
	}
}
