package session

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// The headers a session id is read from, first present wins (DESIGN.md,
// "Sessions"), in canonical form so that the map is indexed without
// canonicalising.
const (
	HeaderGatehouse  = "X-Gatehouse-Session"
	HeaderClaudeCode = "X-Claude-Code-Session-Id"
	// HeaderCodex is Codex's session_id, canonicalised as net/http does.
	HeaderCodex = "Session_id"
)

// MaxIDLen bounds the session id taken from a client: a longer one is cut,
// so that a hostile header costs no more than this to hash.
const MaxIDLen = 256

// ID returns the session id of a request: the first present of the headers
// X-Gatehouse-Session, X-Claude-Code-Session-Id and session_id, then the
// body's prompt_cache_key and metadata.user_id (as the body scan found
// them). "" when none is present.
func ID(h http.Header, promptCacheKey, metadataUserID string) string {
	for _, name := range [...]string{HeaderGatehouse, HeaderClaudeCode, HeaderCodex} {
		if v := h[name]; len(v) > 0 && v[0] != "" {
			return cut(v[0])
		}
	}
	if promptCacheKey != "" {
		return cut(promptCacheKey)
	}
	return cut(metadataUserID)
}

func cut(s string) string {
	if len(s) > MaxIDLen {
		return s[:MaxIDLen]
	}
	return s
}

// HashLen is the length of Hash's result.
const HashLen = 16

// Hash is the session as it is stored and shown: the first 16 hex digits of
// SHA-256 of the client key id and the session id, so that one key's id
// never names another key's session and the id itself is never kept. ""
// for no session id.
func Hash(keyID, id string) string {
	if id == "" {
		return ""
	}
	var buf [MaxIDLen + 64]byte
	b := append(buf[:0], keyID...)
	b = append(b, 0)
	b = append(b, id...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:HashLen/2])
}
