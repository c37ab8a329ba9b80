package gateway

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// The Gemini API (DESIGN.md "Gemini API and model aliases"): the model is in
// the path (…/models/{model}:{method}), the client key in x-goog-api-key,
// ?key= or a Bearer token, errors in google.rpc's shape. Under /v1beta, and
// the three POST routes also under /v1/models/ (the @google/genai SDK's
// other version), where they cannot clash with the OpenAI routes: an OpenAI
// model id never ends in ":generateContent".

// geminiModelEntry is one model of the Gemini listing.
type geminiModelEntry struct {
	id      string
	targets []*target // what the key is checked against
}

// geminiModelEntries lists what GET /v1beta/models may show: every model of
// every enabled gemini connection, as its bare id and as provider/model,
// and every alias whose target one of them serves, sorted by id.
func geminiModelEntries(s *state) []geminiModelEntry {
	var out []geminiModelEntry
	seen := map[string]bool{}
	add := func(id string, ts []*target) {
		if !seen[id] {
			seen[id] = true
			out = append(out, geminiModelEntry{id: id, targets: ts})
		}
	}
	for name, ts := range s.routes[wire.Gemini] {
		add(name, ts)
	}
	for alias, to := range s.eff.Aliases {
		if ts := s.routes[wire.Gemini][to]; len(ts) > 0 {
			add(alias, ts)
		}
	}
	slices.SortFunc(out, func(a, b geminiModelEntry) int { return cmp.Compare(a.id, b.id) })
	return out
}

// listGeminiModels answers GET /v1beta/models (and /v1beta/models/{model})
// with the models key may use, in Gemini's shape, returning errAnswered or
// the error to send.
func listGeminiModels(w http.ResponseWriter, r *http.Request, s *state, ks *clientkey.State, rt route.Route) *apiError {
	want := ""
	if rt == route.GeminiModel {
		want = route.PathModel(r.URL.Path)
	}
	var b []byte
	if want == "" {
		b = append(b, `{"models":[`...)
	}
	n := 0
	for _, e := range s.geminiModels {
		if (want != "" && e.id != want) || len(allowedTargets(ks, e.targets)) == 0 {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"name":`...)
		b = usage.AppendJSONString(b, "models/"+e.id)
		b = append(b, `,"version":"","displayName":`...)
		b = usage.AppendJSONString(b, e.id)
		b = append(b, `,"supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens"]}`...)
	}
	if want == "" {
		b = append(b, "]}"...)
	} else if n == 0 {
		return &apiError{Status: http.StatusNotFound, Code: CodeModelNotFound, Message: "no enabled gemini connection serves model " + quoteModel(want) + " for this key"}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(b)
	}
	return errAnswered
}

// geminiTargetURLs are the upstream URLs of a gemini connection's model:
// BaseURL + "/models/" + model + ":method", by route.
func geminiTargetURLs(c *conn, model string) *[route.Num]url.URL {
	var us [route.Num]url.URL
	for _, rt := range []route.Route{route.Generate, route.StreamGenerate, route.GeminiCount} {
		u := c.base
		u.Path = c.base.Path + "/models/" + model + route.Suffix[rt]
		u.RawPath = ""
		us[rt] = u
	}
	return &us
}
