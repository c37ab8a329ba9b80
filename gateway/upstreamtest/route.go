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
)

// routeOf matches the path by suffix: a ServeMux pattern cannot express
// "any prefix", and providers mount their APIs under arbitrary prefixes.
func routeOf(path string) (route, string) {
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
