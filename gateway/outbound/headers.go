package outbound

import (
	"net/http"
	"strings"
)

// forwardRequestHeader reports whether the client's header k (in canonical
// form) is sent upstream. It is an allowlist (DESIGN.md, "Headers sent
// upstream"): the client's credentials never go, nor do headers that pick
// the account under the connection's key (OpenAI-Organization,
// OpenAI-Project), nor cookies, proxy or hop-by-hop headers, nor anything
// else a client may make up. Accept-Encoding stays out too, so upstream
// answers arrive uncompressed, as the usage tap needs them.
func forwardRequestHeader(k string) bool {
	switch k {
	case "Content-Type", "Accept", "User-Agent", "Anthropic-Version", "Anthropic-Beta",
		"Openai-Beta", "Idempotency-Key", "Traceparent", "Tracestate":
		return true
	}
	return len(k) > len(stainlessPrefix) && strings.HasPrefix(k, stainlessPrefix)
}

// stainlessPrefix starts the SDK telemetry headers of the OpenAI and
// Anthropic SDKs (X-Stainless-Lang, X-Stainless-Retry-Count, …).
const stainlessPrefix = "X-Stainless-"

// relayResponseHeader reports whether the upstream's response header k (in
// canonical form) reaches the client. It is an allowlist (DESIGN.md,
// "Gateway rules that hold under attack"): what a client needs to read the
// body and to quote the upstream's request id, and Retry-After when the
// upstream's answer is relayed as the last one. Never the account's own
// rate-limit headers (they describe the shared account, not the client's
// key), organisation ids, cookies, Server, CORS headers or anything else
// an upstream may add. Gatehouse's own headers (X-Gatehouse-*, the key's
// X-RateLimit-*) are set by the gateway, not copied.
func relayResponseHeader(k string) bool {
	switch k {
	case "Content-Type", "Content-Length", "Cache-Control", "X-Request-Id", "Request-Id",
		"Openai-Processing-Ms", "Retry-After":
		return true
	}
	return false
}

// CopyRequestHeader copies into dst the headers of src that
// forwardRequestHeader allows, less any that src's Connection header names
// as hop-by-hop. Value slices are shared: neither side is modified
// afterwards. It allocates nothing beyond dst's own growth.
func CopyRequestHeader(dst, src http.Header) {
	for k, vv := range src {
		if forwardRequestHeader(k) {
			dst[k] = vv
		}
	}
	for _, v := range src["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			for k := range dst {
				if strings.EqualFold(k, name) {
					delete(dst, k)
				}
			}
		}
	}
}

// CopyResponseHeader copies into dst the headers of the upstream answer src
// that relayResponseHeader allows (Content-Length is the caller's to drop
// when it does not relay the body as it is). Value slices are shared.
func CopyResponseHeader(dst, src http.Header) {
	for k, vv := range src {
		if relayResponseHeader(k) {
			dst[k] = vv
		}
	}
}
