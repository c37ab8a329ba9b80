package gateway

import (
	"net/http"
	"strings"
)

// Hop-by-hop and client-credential headers are never forwarded upstream.
func skipRequestHeader(k string) bool {
	switch k {
	case "Authorization", "X-Api-Key", "Cookie", "Host", "Content-Length",
		"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization",
		"Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

func skipResponseHeader(k string) bool {
	switch k {
	case "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Set-Cookie":
		return true
	}
	return false
}

// copyRequestHeader copies src into dst without hop-by-hop headers (those
// named in Connection too) and without the client's credentials. Value
// slices are shared: neither side is modified afterwards.
func copyRequestHeader(dst, src http.Header) {
	for k, vv := range src {
		if !skipRequestHeader(k) {
			dst[k] = vv
		}
	}
	for _, v := range src["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			delete(dst, http.CanonicalHeaderKey(strings.TrimSpace(name)))
		}
	}
}

func copyResponseHeader(dst, src http.Header) {
	for k, vv := range src {
		if !skipResponseHeader(k) {
			dst[k] = vv
		}
	}
	for _, v := range src["Connection"] {
		for name := range strings.SplitSeq(v, ",") {
			delete(dst, http.CanonicalHeaderKey(strings.TrimSpace(name)))
		}
	}
}
