package gateway

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// The Gemini API (DESIGN.md "Gemini API and model aliases"): the model is in
// the path (…/models/{model}:{method}), the client key in x-goog-api-key,
// ?key= or a Bearer token, errors in google.rpc's shape. Under /v1beta, and
// the three POST routes also under /v1/models/ (the @google/genai SDK's
// other version), where they cannot clash with the OpenAI routes: an OpenAI
// model id never ends in ":generateContent".

// Path prefixes of the Gemini routes.
const (
	geminiBeta        = "/v1beta"
	geminiModels      = "/v1beta/models"
	geminiModelPrefix = "/v1beta/models/"
)

// geminiMethods maps the method after a model path's last ':' to its route.
var geminiMethods = map[string]route{
	"generateContent":       routeGenerate,
	"streamGenerateContent": routeStreamGenerate,
	"countTokens":           routeGeminiCount,
}

// geminiRouteOf maps a Gemini path to its route: a model method under
// /v1beta/models/ or /v1/models/, the model list, or one model.
func geminiRouteOf(path string) (route, bool) {
	rest, beta := strings.CutPrefix(path, geminiModelPrefix)
	if !beta {
		if path == geminiModels {
			return routeGeminiModels, true
		}
		if rest, ok := strings.CutPrefix(path, modelPrefix); ok {
			if i := strings.LastIndexByte(rest, ':'); i > 0 {
				rt, ok := geminiMethods[rest[i+1:]]
				return rt, ok
			}
		}
		return 0, false
	}
	if i := strings.LastIndexByte(rest, ':'); i > 0 {
		// A method Gatehouse does not serve (embedContent, …) is no model
		// name: 404, not a 405 from the one-model listing.
		rt, ok := geminiMethods[rest[i+1:]]
		return rt, ok
	}
	return routeGeminiModel, rest != ""
}

// geminiPathModel returns the model a Gemini path names: what lies between
// "models/" and the method (or the end), less a further "models/" (a client
// that passed the resource name as the id).
func geminiPathModel(path string) string {
	rest, ok := strings.CutPrefix(path, geminiModelPrefix)
	if !ok {
		rest = strings.TrimPrefix(path, modelPrefix)
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		if _, ok := geminiMethods[rest[i+1:]]; ok {
			rest = rest[:i]
		}
	}
	return strings.TrimPrefix(rest, "models/")
}

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
func listGeminiModels(w http.ResponseWriter, r *http.Request, s *state, ks *clientkey.State, rt route) *apiError {
	want := ""
	if rt == routeGeminiModel {
		want = geminiPathModel(r.URL.Path)
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
func geminiTargetURLs(c *conn, model string) *[numRoutes]url.URL {
	var us [numRoutes]url.URL
	for _, rt := range []route{routeGenerate, routeStreamGenerate, routeGeminiCount} {
		u := c.base
		u.Path = c.base.Path + "/models/" + model + routeSuffix[rt]
		u.RawPath = ""
		us[rt] = u
	}
	return &us
}
