// Package route is the gateway's client API surface: every /v1 and /v1beta
// path the gateway answers (Route, Of), the API style each speaks, the
// upstream path suffix it is forwarded to, which routes are answered from
// the configuration and which count tokens without inference, and the
// model a Gemini path names. handlers/routes.go mounts the gateway under
// /v1 and /v1beta; Gateway.ServeHTTP (proxy.go) starts with Of.
//
// It only reads paths: it never reads a body, never sees a key and never
// knows a connection.
//
// The Gemini methods (generateContent, streamGenerateContent, countTokens) are served
// under /v1beta/models/ and /v1/models/ (an OpenAI model id never ends in
// :generateContent, so GET /v1/models/{id} stays OpenAI's retrieve); their model is the
// path's, between models/ and the last ':', and the body is never scanned. Any other path
// under /v1beta is 404 in Gemini's shape, under /v1 in OpenAI's, so Go's plain-text 404
// never answers an API path.
package route

import (
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// Route is one client API endpoint.
type Route uint8

const (
	Chat Route = iota
	Completions
	Embeddings
	Responses
	Messages
	CountTokens    // Anthropic's POST /v1/messages/count_tokens: no slot, no rpm/rpd
	Generate       // Gemini's POST …/models/{model}:generateContent
	StreamGenerate // Gemini's POST …/models/{model}:streamGenerateContent
	GeminiCount    // Gemini's POST …/models/{model}:countTokens: no slot, no rpm/rpd
	// Num is the number of forwarded routes: the ones above.
	Num
	Models       // GET /v1/models; not forwarded
	Model        // GET /v1/models/{id}; not forwarded
	GeminiModels // GET /v1beta/models; not forwarded
	GeminiModel  // GET /v1beta/models/{model}; not forwarded
	Limits       // GET /v1/gatehouse/limits: the key's own limits
	Unknown      // no such route (for the request log)
)

// Paths the routes are told apart by.
const (
	// ModelPrefix starts the path of one model (GET /v1/models/{id}); the
	// id may hold a slash (provider/model).
	ModelPrefix = "/v1/models/"
	// LimitsPath is the path of the key's own limits.
	LimitsPath = "/v1/gatehouse/limits"
	// GeminiBeta prefixes the Gemini API's paths.
	GeminiBeta        = "/v1beta"
	geminiModels      = "/v1beta/models"
	geminiModelPrefix = "/v1beta/models/"
)

// Suffix is the upstream path after the connection's BaseURL; a Gemini
// route's follows BaseURL + "/models/" + the upstream model.
var Suffix = [Num]string{"/chat/completions", "/completions", "/embeddings", "/responses", "/messages", "/messages/count_tokens",
	":generateContent", ":streamGenerateContent", ":countTokens"}

// Of maps a request path to its route.
func Of(path string) (Route, bool) {
	if rt, ok := geminiOf(path); ok {
		return rt, true
	}
	switch path {
	case "/v1/chat/completions":
		return Chat, true
	case "/v1/completions":
		return Completions, true
	case "/v1/embeddings":
		return Embeddings, true
	case "/v1/responses":
		return Responses, true
	case "/v1/messages":
		return Messages, true
	case "/v1/messages/count_tokens":
		return CountTokens, true
	case "/v1/models":
		return Models, true
	case LimitsPath:
		return Limits, true
	}
	if len(path) > len(ModelPrefix) && strings.HasPrefix(path, ModelPrefix) {
		return Model, true
	}
	return 0, false
}

// Style is the API style r speaks: its request and error shapes.
func (r Route) Style() wire.Style {
	switch r {
	case Messages, CountTokens:
		return wire.Anthropic
	case Generate, StreamGenerate, GeminiCount, GeminiModels, GeminiModel:
		return wire.Gemini
	}
	return wire.OpenAI
}

// Free reports whether r is token counting: no inference, so no slot, no
// rpm/rpd and no token budget.
func (r Route) Free() bool { return r == CountTokens || r == GeminiCount }

// Listing reports whether r is answered from the configuration (a model
// list or one model), never forwarded.
func (r Route) Listing() bool {
	return r == Models || r == Model || r == GeminiModels || r == GeminiModel
}

// Operation is gen_ai.operation.name for r: the GenAI conventions' chat,
// text_completion and embeddings; the Responses API and Anthropic's
// Messages are chat APIs, so chat as well (http.route tells them apart);
// count_tokens is no inference and keeps a name of its own (Gemini's
// countTokens too); Gemini's generateContent is the conventions'
// generate_content.
func (r Route) Operation() string {
	switch r {
	case Completions:
		return "text_completion"
	case Embeddings:
		return "embeddings"
	case CountTokens, GeminiCount:
		return "count_tokens"
	case Generate, StreamGenerate:
		return "generate_content"
	}
	return "chat"
}

// logNames are the request log's names of the routes.
var logNames = [...]string{
	Chat: "chat", Completions: "completions", Embeddings: "embeddings",
	Responses: "responses", Messages: "messages", CountTokens: "count_tokens",
	Models: "models", Model: "models", Limits: "limits", Unknown: "unknown",
	Generate: "gemini", StreamGenerate: "gemini", GeminiCount: "gemini",
	GeminiModels: "models", GeminiModel: "models",
}

// LogName is r's name in the request log: chat, completions, responses,
// messages, embeddings, count_tokens, gemini (every Gemini model method),
// models, limits or unknown.
func (r Route) LogName() string { return logNames[r] }
