package upstreamtest

import (
	"net/http"
	"strings"
)

// route is one API endpoint.
type route int

const (
	routeNone route = iota
	routeChat
	routeCompletions
	routeEmbeddings
	routeResponses
	routeMessages
	routeCountTokens
	routeModels
	routeGenerate       // Gemini …/models/{model}:generateContent
	routeStreamGenerate // Gemini …/models/{model}:streamGenerateContent
	routeGeminiCount    // Gemini …/models/{model}:countTokens
)

// geminiMethod maps the method part of a Gemini model path to its route.
var geminiMethod = map[string]route{
	"generateContent":       routeGenerate,
	"streamGenerateContent": routeStreamGenerate,
	"countTokens":           routeGeminiCount,
}

// geminiRoute splits a Gemini model path (…/models/{model}:{method}) into
// its route and model; routeNone when the path is not one.
func geminiRoute(path string) (route, string) {
	i := strings.LastIndexByte(path, ':')
	if i < 0 {
		return routeNone, ""
	}
	rt, ok := geminiMethod[path[i+1:]]
	if !ok {
		return routeNone, ""
	}
	j := strings.LastIndex(path[:i], "/models/")
	if j < 0 || j+len("/models/") == i {
		return routeNone, ""
	}
	return rt, path[j+len("/models/") : i]
}

// routeOf matches the path by suffix: a ServeMux pattern cannot express
// "any prefix", and providers mount their APIs under arbitrary prefixes.
func routeOf(path string) (route, string) {
	if rt, _ := geminiRoute(path); rt != routeNone {
		return rt, http.MethodPost
	}
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return routeChat, http.MethodPost
	case strings.HasSuffix(path, "/completions"):
		return routeCompletions, http.MethodPost
	case strings.HasSuffix(path, "/embeddings"):
		return routeEmbeddings, http.MethodPost
	case strings.HasSuffix(path, "/responses"):
		return routeResponses, http.MethodPost
	case strings.HasSuffix(path, "/messages"):
		return routeMessages, http.MethodPost
	case strings.HasSuffix(path, "/messages/count_tokens"):
		return routeCountTokens, http.MethodPost
	case strings.HasSuffix(path, "/models"):
		return routeModels, http.MethodGet
	}
	return routeNone, ""
}
