package route

import "strings"

// The Gemini API's paths (DESIGN.md "Gemini API and model aliases"): the
// model is in the path (…/models/{model}:{method}). Under /v1beta, and the
// three POST routes also under /v1/models/ (the @google/genai SDK's other
// version), where they cannot clash with the OpenAI routes: an OpenAI model
// id never ends in ":generateContent".

// geminiMethods maps the method after a model path's last ':' to its route.
var geminiMethods = map[string]Route{
	"generateContent":       Generate,
	"streamGenerateContent": StreamGenerate,
	"countTokens":           GeminiCount,
}

// geminiOf maps a Gemini path to its route: a model method under
// /v1beta/models/ or /v1/models/, the model list, or one model.
func geminiOf(path string) (Route, bool) {
	rest, beta := strings.CutPrefix(path, geminiModelPrefix)
	if !beta {
		if path == geminiModels {
			return GeminiModels, true
		}
		if rest, ok := strings.CutPrefix(path, ModelPrefix); ok {
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
	return GeminiModel, rest != ""
}

// PathModel returns the model a Gemini path names: what lies between
// "models/" and the method (or the end), less a further "models/" (a client
// that passed the resource name as the id).
func PathModel(path string) string {
	rest, ok := strings.CutPrefix(path, geminiModelPrefix)
	if !ok {
		rest = strings.TrimPrefix(path, ModelPrefix)
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		if _, ok := geminiMethods[rest[i+1:]]; ok {
			rest = rest[:i]
		}
	}
	return strings.TrimPrefix(rest, "models/")
}
