package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// TestModelNameCutInErrors: a 404 quotes a client's model name cut to 128
// characters on a rune boundary, so a 30 MB name is not echoed back (through
// real HTTP, in the body and in GET /v1/models/{id}).
func TestModelNameCutInErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	e.gw.Apply(Config{Connections: []Connection{e.conn("oa", "k-oa", "glm-5")}})
	// Two-byte runes, so a cut by bytes would land inside one.
	name := strings.Repeat("é", 30<<20/2)
	want := strconv.Quote(strings.Repeat("é", 128) + "…")

	check := func(t *testing.T, r reply) {
		t.Helper()
		if r.status != http.StatusNotFound || r.errorCode(t) != CodeModelNotFound {
			t.Fatalf("status %d code %q, want 404 %s", r.status, r.errorCode(t), CodeModelNotFound)
		}
		var eb errorBody
		if err := json.Unmarshal([]byte(r.body), &eb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(eb.Error.Message, want) || !utf8.ValidString(eb.Error.Message) {
			t.Errorf("message %.300q does not quote the name cut to 128 characters", eb.Error.Message)
		}
		if len(r.body) > 1024 {
			t.Errorf("body is %d bytes, want the name cut", len(r.body))
		}
	}
	t.Run("body", func(t *testing.T) {
		check(t, e.post(testCtx(t), "/v1/chat/completions", chatBody(name, false)))
	})
	t.Run("path", func(t *testing.T) {
		// A long path, not 30 MB: the HTTP server bounds the request line.
		check(t, e.send(testCtx(t), http.MethodGet, "/v1/models/"+strings.Repeat("é", 4000), ""))
	})
	// A name within the bound is quoted whole.
	if got := quoteModel(strings.Repeat("é", 128)); got != strconv.Quote(strings.Repeat("é", 128)) {
		t.Errorf("quoteModel cut a 128-character name: %q", got)
	}
}
