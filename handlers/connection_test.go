package handlers

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/google/go-cmp/cmp"
)

// overridesOf decodes a connection response's rateLimitOverrides.
func overridesOf(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var c struct {
		RateLimitOverrides map[string]any `json:"rateLimitOverrides"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("decode connection: %v\n%s", err, body)
	}
	return c.RateLimitOverrides
}

// jsonValue decodes a JSON literal for comparisons with decoded responses.
func jsonValue(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return m
}

// modelCapsJSON is overrides capping n models, m0 … m<n-1>, at 1 each.
func modelCapsJSON(n int) string {
	caps := make(map[string]int, n)
	for i := range n {
		caps[fmt.Sprintf("m%d", i)] = 1
	}
	b, _ := json.Marshal(map[string]any{"modelConcurrency": caps})
	return string(b)
}

func TestOverridesAccepted(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	key128 := strings.Repeat("m", 128)
	tests := []struct {
		name      string
		overrides string
	}{
		{"caps with scalars", `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"rpm":60,"maxWaitMs":30000}`},
		{"execution bound", `{"executionMaxWaitMs":300000}`},
		{"execution bound and wait", `{"executionMaxWaitMs":300000,"maxWaitMs":30000}`},
		{"rpd alone", `{"rpd":500}`},
		{"rpd with others", `{"rpd":500,"rpm":10,"tpm":100000,"tpd":10000000000,"minTime":250,"maxQueueDepth":20,"maxConcurrent":0}`},
		{"cap bounds", `{"modelConcurrency":{"small":1,"large":10000}}`},
		{"128-character model key", `{"modelConcurrency":{"` + key128 + `":2}}`},
		{"500 model caps, the most allowed", modelCapsJSON(500)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := connectionBody(fmt.Sprintf("accepted-%d", i))
			body["rateLimitOverrides"] = json.RawMessage(tt.overrides)
			created := a.createConnection(t, body)
			want := jsonValue(t, tt.overrides)
			got := a.do(t, call{method: http.MethodGet, path: path("connections", created["id"].(string))}).
				want(t, http.StatusOK)
			if diff := cmp.Diff(want, overridesOf(t, got.body)); diff != "" {
				t.Errorf("stored overrides mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOverridesRejected(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	created := a.createConnection(t, connectionBody("rejected"))
	id := created["id"].(string)
	before := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)

	key129 := strings.Repeat("m", 129)
	const p = "rateLimitOverrides"
	tests := []struct {
		name       string
		overrides  string
		wantFields []string
	}{
		{"negative rpd", `{"rpd":-10}`, []string{p + ".rpd"}},
		{"fractional rpd", `{"rpd":12.5}`, []string{p + ".rpd"}},
		{"string rpd", `{"rpd":"500"}`, []string{p + ".rpd"}},
		{
			"bad caps all reported",
			`{"modelConcurrency":{"a":0,"b":-1,"c":1.5,"d":"2","e":10001,"ok":1}}`,
			[]string{p + ".modelConcurrency.a", p + ".modelConcurrency.b", p + ".modelConcurrency.c",
				p + ".modelConcurrency.d", p + ".modelConcurrency.e"},
		},
		{"129-character key", `{"modelConcurrency":{"` + key129 + `":1}}`, []string{p + ".modelConcurrency." + key129}},
		{"empty key", `{"modelConcurrency":{"":1}}`, []string{p + ".modelConcurrency."}},
		{"array map", `{"modelConcurrency":[1,2]}`, []string{p + ".modelConcurrency"}},
		{"string map", `{"modelConcurrency":"glm-5=1"}`, []string{p + ".modelConcurrency"}},
		{"501 model caps", modelCapsJSON(501), []string{p + ".modelConcurrency"}},
		{"unknown key", `{"tmp":1}`, []string{p + ".tmp"}},
		{
			"everything together",
			`{"tmp":1,"rpd":-10,"maxWaitMs":120001,"modelConcurrency":{"glm-5":0,"":2}}`,
			[]string{p + ".maxWaitMs", p + ".modelConcurrency.", p + ".modelConcurrency.glm-5", p + ".rpd", p + ".tmp"},
		},
	}
	// The group ends when its parallel cases have, so the row can be checked after.
	t.Run("cases", func(t *testing.T) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				// On create.
				body := connectionBody(fmt.Sprintf("rejected-%d", i))
				body["rateLimitOverrides"] = json.RawMessage(tt.overrides)
				r := a.do(t, call{method: http.MethodPost, path: path("connections"), body: body, invalidRequest: true})
				if diff := cmp.Diff(tt.wantFields, fields(problemOf(t, r, http.StatusUnprocessableEntity))); diff != "" {
					t.Errorf("create: field errors mismatch (-want +got):\n%s", diff)
				}
				// On PATCH and PUT of an existing row, which must stay exactly as it was.
				patch := `{"name":"renamed-` + fmt.Sprint(i) + `","rateLimitOverrides":` + tt.overrides + `}`
				r = a.do(t, call{method: http.MethodPatch, path: path("connections", id), body: patch, invalidRequest: true})
				if diff := cmp.Diff(tt.wantFields, fields(problemOf(t, r, http.StatusUnprocessableEntity))); diff != "" {
					t.Errorf("patch: field errors mismatch (-want +got):\n%s", diff)
				}
				put := connectionBody("rejected")
				put["rateLimitOverrides"] = json.RawMessage(tt.overrides)
				r = a.do(t, call{method: http.MethodPut, path: path("connections", id), body: put, invalidRequest: true})
				problemOf(t, r, http.StatusUnprocessableEntity)
			})
		}
	})
	after := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)
	if diff := cmp.Diff(string(before.body), string(after.body)); diff != "" {
		t.Errorf("rejected writes changed the row (-before +after):\n%s", diff)
	}
	if b, a := before.header.Get("ETag"), after.header.Get("ETag"); b != a {
		t.Errorf("ETag changed from %s to %s", b, a)
	}
}

func TestConnectionFieldRules(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	tests := []struct {
		name       string
		edit       func(m map[string]any)
		wantFields []string
	}{
		{"name characters", func(m map[string]any) { m["name"] = "no spaces" }, []string{"name"}},
		{"name too long", func(m map[string]any) { m["name"] = strings.Repeat("n", 65) }, []string{"name"}},
		{"name null", func(m map[string]any) { m["name"] = nil }, []string{"name"}},
		{"name absent", func(m map[string]any) { delete(m, "name") }, []string{"name"}},
		{"provider upper case", func(m map[string]any) { m["provider"] = "ZAI" }, []string{"provider"}},
		{"provider too long", func(m map[string]any) { m["provider"] = strings.Repeat("p", 33) }, []string{"provider"}},
		{"api style", func(m map[string]any) { m["apiStyle"] = "grpc" }, []string{"apiStyle"}},
		{"relative base URL", func(m map[string]any) { m["baseUrl"] = "/v1" }, []string{"baseUrl"}},
		{"ftp base URL", func(m map[string]any) { m["baseUrl"] = "ftp://example.com/v1" }, []string{"baseUrl"}},
		{"base URL with query", func(m map[string]any) { m["baseUrl"] = "https://example.com/v1?x=1" }, []string{"baseUrl"}},
		{"no models", func(m map[string]any) { m["models"] = []string{} }, []string{"models"}},
		{"models null", func(m map[string]any) { m["models"] = nil }, []string{"models"}},
		{"too many models", func(m map[string]any) {
			ms := make([]string, 501)
			for i := range ms {
				ms[i] = fmt.Sprintf("m%d", i)
			}
			m["models"] = ms
		}, []string{"models"}},
		{"model too long", func(m map[string]any) { m["models"] = []string{"ok", strings.Repeat("m", 129)} }, []string{"models.1"}},
		{"model not a string", func(m map[string]any) { m["models"] = []any{"ok", 3} }, []string{"models.1"}},
		{"models bad in two ways", func(m map[string]any) { m["models"] = []any{"a b", 3, strings.Repeat("m", 129)} },
			[]string{"models.0", "models.1", "models.2"}},
		{"duplicate models", func(m map[string]any) { m["models"] = []string{"a", "a"} }, []string{"models"}},
		{"priority range", func(m map[string]any) { m["priority"] = 1001 }, []string{"priority"}},
		{"priority fraction", func(m map[string]any) { m["priority"] = 1.5 }, []string{"priority"}},
		{"priority tiny fraction", func(m map[string]any) { m["priority"] = json.RawMessage("1e-999999999") }, []string{"priority"}},
		{"priority huge", func(m map[string]any) { m["priority"] = json.RawMessage("1e999999999") }, []string{"priority"}},
		{"enabled string", func(m map[string]any) { m["enabled"] = "yes" }, []string{"enabled"}},
		{"api key missing", func(m map[string]any) { delete(m, "apiKey") }, []string{"apiKey"}},
		{"api key null", func(m map[string]any) { m["apiKey"] = nil }, []string{"apiKey"}},
		{"api key with space", func(m map[string]any) { m["apiKey"] = "sk key" }, []string{"apiKey"}},
		{"unknown field", func(m map[string]any) { m["colour"] = "red" }, []string{"colour"}},
		{"several at once", func(m map[string]any) {
			m["name"], m["provider"], m["priority"], m["extra"] = "", "Bad", -1001, true
		}, []string{"extra", "name", "priority", "provider"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := connectionBody(fmt.Sprintf("rules-%d", i))
			tt.edit(body)
			r := a.do(t, call{method: http.MethodPost, path: path("connections"), body: body, invalidRequest: true})
			if diff := cmp.Diff(tt.wantFields, fields(problemOf(t, r, http.StatusUnprocessableEntity))); diff != "" {
				t.Errorf("field errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConnectionDefaultsAndPutBack(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	body := connectionBody("defaults")
	body["priority"], body["enabled"], body["rateLimitOverrides"] = nil, nil, nil
	c := a.createConnection(t, body)
	if c["priority"] != 0.0 || c["enabled"] != true || len(c["rateLimitOverrides"].(map[string]any)) != 0 {
		t.Errorf("defaults: priority %v, enabled %v, overrides %v; want 0, true, {}", c["priority"], c["enabled"], c["rateLimitOverrides"])
	}
	if _, ok := c["apiKey"]; ok {
		t.Errorf("response carries apiKey")
	}
	if c["apiKeyPreview"] == "" {
		t.Errorf("response has no apiKeyPreview")
	}
	id := c["id"].(string)
	got := a.do(t, call{method: http.MethodGet, path: path("connections", id)}).want(t, http.StatusOK)
	if et := got.header.Get("ETag"); et != `"1"` {
		t.Errorf("ETag = %s, want \"1\"", et)
	}
	// The GET body goes back as it is: read-only fields are ignored, the key is kept.
	put := a.do(t, call{method: http.MethodPut, path: path("connections", id), body: got.body}).want(t, http.StatusOK).json(t)
	if put["version"] != 2.0 || put["apiKeyPreview"] != c["apiKeyPreview"] || put["createdAt"] != c["createdAt"] {
		t.Errorf("PUT back: %v", put)
	}
}

func TestConnectionNameTaken(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	a.createConnection(t, connectionBody("taken"))
	other := a.createConnection(t, connectionBody("other"))
	r := a.do(t, call{method: http.MethodPost, path: path("connections"), body: connectionBody("taken")})
	if diff := cmp.Diff([]string{"name"}, fields(problemOf(t, r, http.StatusConflict))); diff != "" {
		t.Errorf("create: (-want +got):\n%s", diff)
	}
	r = a.do(t, call{method: http.MethodPatch, path: path("connections", other["id"].(string)), body: `{"name":"taken"}`})
	problemOf(t, r, http.StatusConflict)
}

func TestPatchMerges(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	const caps = `{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"rpm":60}`
	tests := []struct {
		name        string
		contentType string
		patch       string
		want        string // the overrides after the patch
		wantName    string // "" = unchanged
	}{
		{"rename keeps overrides", httpkit.MergePatchContentType, `{"name":"renamed-0"}`, caps, "renamed-0"},
		{"remove one cap", httpkit.MergePatchContentType, `{"rateLimitOverrides":{"modelConcurrency":{"glm-5":null}}}`,
			`{"maxConcurrent":4,"modelConcurrency":{"glm-4.7":3},"rpm":60}`, ""},
		{"clear all", httpkit.JSONContentType, `{"rateLimitOverrides":null}`, `{}`, ""},
		{"last caps removed", httpkit.MergePatchContentType, `{"rateLimitOverrides":{"modelConcurrency":{"glm-5":null,"glm-4.7":null}}}`,
			`{"maxConcurrent":4,"rpm":60}`, ""},
		{"empty map normalised", httpkit.JSONContentType, `{"rateLimitOverrides":{"modelConcurrency":{}}}`, caps, ""},
		{"raise execution bound", httpkit.JSONContentType, `{"rateLimitOverrides":{"executionMaxWaitMs":300000,"rpm":null}}`,
			`{"maxConcurrent":4,"modelConcurrency":{"glm-5":1,"glm-4.7":3},"executionMaxWaitMs":300000}`, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := connectionBody(fmt.Sprintf("patch-%d", i))
			body["rateLimitOverrides"] = json.RawMessage(caps)
			id := a.createConnection(t, body)["id"].(string)
			r := a.do(t, call{method: http.MethodPatch, path: path("connections", id), contentType: tt.contentType, body: tt.patch}).
				want(t, http.StatusOK)
			if diff := cmp.Diff(jsonValue(t, tt.want), overridesOf(t, r.body)); diff != "" {
				t.Errorf("overrides mismatch (-want +got):\n%s", diff)
			}
			wantName := tt.wantName
			if wantName == "" {
				wantName = body["name"].(string)
			}
			if got := r.json(t)["name"]; got != wantName {
				t.Errorf("name = %v, want %s", got, wantName)
			}
		})
	}
}

func TestPutNormalisesEmptyModelMap(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	body := connectionBody("empty-map")
	body["rateLimitOverrides"] = json.RawMessage(`{"modelConcurrency":{},"maxConcurrent":2}`)
	c := a.createConnection(t, body)
	if diff := cmp.Diff(jsonValue(t, `{"maxConcurrent":2}`), c["rateLimitOverrides"]); diff != "" {
		t.Errorf("overrides mismatch (-want +got):\n%s", diff)
	}
}

func TestHealthReset(t *testing.T) {
	t.Parallel()
	resets := make(chan string, 1)
	a := newTestAPI(t, apiOptions{gates: fakeGates{
		snapshot: func() live.Snapshot { return live.Snapshot{} },
		reset: func(id string) bool {
			resets <- id
			return true
		},
	}})
	id := a.createConnection(t, connectionBody("health"))["id"].(string)
	a.do(t, call{method: http.MethodPost, path: path("connections", id, "health", "reset"), token: a.viewer}).
		want(t, http.StatusForbidden)
	a.do(t, call{method: http.MethodPost, path: path("connections", id, "health", "reset")}).want(t, http.StatusNoContent)
	if got := <-resets; got != id {
		t.Errorf("reset %s, want %s", got, id)
	}
	r := a.do(t, call{method: http.MethodPost, path: path("connections", "6f1c0000-0000-4000-8000-000000000000", "health", "reset")})
	problemOf(t, r, http.StatusNotFound)

	// Without a gateway there is nothing to reset, and no gates to show.
	b := newTestAPI(t, apiOptions{})
	id = b.createConnection(t, connectionBody("health"))["id"].(string)
	problemOf(t, b.do(t, call{method: http.MethodPost, path: path("connections", id, "health", "reset")}), http.StatusNotFound)
	g := b.do(t, call{method: http.MethodGet, path: path("gates")}).want(t, http.StatusOK)
	if diff := cmp.Diff(`{"gates":[],"connections":[],"clients":[]}`, strings.TrimSpace(string(g.body))); diff != "" {
		t.Errorf("gates without a gateway (-want +got):\n%s", diff)
	}
}

func TestWholeNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		in     string
		want   int64
		wantOK bool
	}{
		{"integer", "12", 12, true},
		{"negative", "-7", -7, true},
		{"decimal point", "1.0", 1, true},
		{"exponent", "1e3", 1000, true},
		{"negative exponent but whole", "10e-1", 1, true},
		{"fraction", "1.5", 0, false},
		{"tiny fraction", "1e-999999999", 0, false},
		{"huge saturates", "1e999999999", math.MaxInt64, true},
		{"huge negative saturates", "-1e999999999", math.MinInt64, true},
		{"string", `"1"`, 0, false},
		{"bool", "true", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := httpkit.WholeNumber(json.RawMessage(tt.in))
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("wholeNumber(%s) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestPriorityOutOfRangeSaysRange(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t, apiOptions{})
	body := connectionBody("huge-priority")
	body["priority"] = json.RawMessage("1e999999999")
	p := problemOf(t, a.do(t, call{method: http.MethodPost, path: path("connections"), body: body, invalidRequest: true}),
		http.StatusUnprocessableEntity)
	want := []limitsFieldError{{Field: "priority", Message: "must be a whole number from -1000 to 1000"}}
	got := make([]limitsFieldError, 0, len(p.Errors))
	for _, e := range p.Errors {
		got = append(got, limitsFieldError{Field: e.Field, Message: e.Message})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
}

// limitsFieldError is a field error's JSON part, for comparisons.
type limitsFieldError struct{ Field, Message string }
