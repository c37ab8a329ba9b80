package gateway

import (
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// The /v1 and /v1beta route table: every client API path the gateway
// answers, the API style it speaks and the upstream path it is forwarded to
// (Gemini's paths are parsed in gemini.go). handlers/routes.go mounts the
// gateway under /v1 and /v1beta and points here; Gateway.ServeHTTP
// (proxy.go) starts with routeOf.

// route is one client API endpoint.
type route uint8

const (
	routeChat route = iota
	routeCompletions
	routeEmbeddings
	routeResponses
	routeMessages
	routeCountTokens    // Anthropic's POST /v1/messages/count_tokens: no slot, no rpm/rpd
	routeGenerate       // Gemini's POST …/models/{model}:generateContent
	routeStreamGenerate // Gemini's POST …/models/{model}:streamGenerateContent
	routeGeminiCount    // Gemini's POST …/models/{model}:countTokens: no slot, no rpm/rpd
	numRoutes
	routeModels       // GET /v1/models; not forwarded
	routeModel        // GET /v1/models/{id}; not forwarded
	routeGeminiModels // GET /v1beta/models; not forwarded
	routeGeminiModel  // GET /v1beta/models/{model}; not forwarded
	routeLimits       // GET /v1/gatehouse/limits: the key's own limits (signals.go)
	routeUnknown      // no such route (for the request log)
)

// modelPrefix starts the path of one model (GET /v1/models/{id}); the id may hold a
// slash (provider/model).
const modelPrefix = "/v1/models/"

// routeSuffix is the upstream path after the connection's BaseURL; a Gemini
// route's follows BaseURL + "/models/" + the upstream model.
var routeSuffix = [numRoutes]string{"/chat/completions", "/completions", "/embeddings", "/responses", "/messages", "/messages/count_tokens",
	":generateContent", ":streamGenerateContent", ":countTokens"}

// routeOf maps a request path to its route.
func routeOf(path string) (route, bool) {
	if rt, ok := geminiRouteOf(path); ok {
		return rt, true
	}
	switch path {
	case "/v1/chat/completions":
		return routeChat, true
	case "/v1/completions":
		return routeCompletions, true
	case "/v1/embeddings":
		return routeEmbeddings, true
	case "/v1/responses":
		return routeResponses, true
	case "/v1/messages":
		return routeMessages, true
	case "/v1/messages/count_tokens":
		return routeCountTokens, true
	case "/v1/models":
		return routeModels, true
	case limitsPath:
		return routeLimits, true
	}
	if len(path) > len(modelPrefix) && strings.HasPrefix(path, modelPrefix) {
		return routeModel, true
	}
	return 0, false
}

func (r route) style() wire.Style {
	switch r {
	case routeMessages, routeCountTokens:
		return wire.Anthropic
	case routeGenerate, routeStreamGenerate, routeGeminiCount, routeGeminiModels, routeGeminiModel:
		return wire.Gemini
	}
	return wire.OpenAI
}

// free reports whether r is token counting: no inference, so no slot, no
// rpm/rpd and no token budget (counttokens.go).
func (r route) free() bool { return r == routeCountTokens || r == routeGeminiCount }

// listing reports whether r is answered from the configuration (a model
// list or one model), never forwarded.
func (r route) listing() bool {
	return r == routeModels || r == routeModel || r == routeGeminiModels || r == routeGeminiModel
}
