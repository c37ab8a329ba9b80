// Package scrub makes an upstream's error message fit to keep in the request
// log: its first MaxMessage bytes, without a secret (a credential, a token, an
// Authorization value) and without any echo of the request body (a prompt).
//
// Redaction errs on the side of removing: a long opaque run of letters and
// digits is taken for a token even when it is an id, and any stretch of the
// message also found in the request body is taken for the prompt.
package scrub

import (
	"bytes"
	"strings"
)

// MaxMessage is how many bytes of an upstream's message are kept.
const MaxMessage = 512

// Redacted replaces a secret; Echoed replaces a stretch of the request body.
const (
	Redacted = "[redacted]"
	Echoed   = "[request text]"
)

// Message returns msg's first MaxMessage bytes (cut on a rune boundary), with
// every stretch of at least echoWindow bytes also found in body replaced by
// Echoed, every occurrence of a secret replaced by Redacted, and then Secrets
// applied. body is the request as sent upstream; secrets are the credential
// values the gateway sent (empty ones are ignored).
func Message(msg, body []byte, secrets ...string) string {
	if len(msg) > MaxMessage {
		// A rune cut in two is dropped by ToValidUTF8 below.
		msg = msg[:MaxMessage]
	}
	s := string(dropEchoes(msg, body))
	for _, sec := range secrets {
		s = dropSecret(s, sec)
	}
	return Secrets(strings.ToValidUTF8(s, ""))
}

// echoWindow is the shortest stretch of the message taken for an echo of the
// request body: shorter ones (a model name, a field name) say nothing of a prompt.
const echoWindow = 16

// dropEchoes replaces each stretch of msg of at least echoWindow bytes that also
// occurs in body by Echoed. Windows of echoWindow bytes are tried every
// echoWindow/2 bytes, and a hit is grown both ways while the longer stretch is
// still in body, so an echo leaves no fragment of echoWindow/2 bytes or more.
func dropEchoes(msg, body []byte) []byte {
	if len(body) < echoWindow || len(msg) < echoWindow {
		return msg
	}
	type span struct{ lo, hi int }
	var hits []span
	for i := 0; i+echoWindow <= len(msg); i += echoWindow / 2 {
		if len(hits) > 0 && hits[len(hits)-1].hi >= i+echoWindow {
			continue
		}
		if !bytes.Contains(body, msg[i:i+echoWindow]) {
			continue
		}
		lo, hi := i, i+echoWindow
		for lo > 0 && bytes.Contains(body, msg[lo-1:hi]) {
			lo--
		}
		for hi < len(msg) && bytes.Contains(body, msg[lo:hi+1]) {
			hi++
		}
		if n := len(hits); n > 0 && hits[n-1].hi >= lo {
			hits[n-1].hi = max(hits[n-1].hi, hi)
			continue
		}
		hits = append(hits, span{lo, hi})
	}
	if len(hits) == 0 {
		return msg
	}
	out := make([]byte, 0, len(msg))
	at := 0
	for _, h := range hits {
		out = append(out, msg[at:h.lo]...)
		out = append(out, Echoed...)
		at = h.hi
	}
	return append(out, msg[at:]...)
}

// dropSecret replaces every occurrence of secret in s, and a message cut in
// the middle of it (s ends with its first 8 bytes or more), by Redacted.
func dropSecret(s, secret string) string {
	if len(secret) < 8 {
		return s
	}
	s = strings.ReplaceAll(s, secret, Redacted)
	for n := min(len(secret)-1, len(s)); n >= 8; n-- {
		if strings.HasSuffix(s, secret[:n]) {
			return s[:len(s)-n] + Redacted
		}
	}
	return s
}

// secretNames are the names whose value, after ':' or '=' (quoted or not), is
// a secret.
var secretNames = []string{"authorization", "api_key", "api-key", "apikey", "x-api-key", "access_token",
	"refresh_token", "token", "secret", "password", "key"}

// Secrets replaces in s the values that may be secrets by Redacted: the word
// after "Bearer " or "Basic ", the value after a secret's name (api_key=…,
// "token": "…", Authorization: …), provider key shapes (sk-…, AIza…), and any
// run of 32 or more letters, digits, '-' or '_' mixing letters and digits
// that is not a UUID.
func Secrets(s string) string {
	var b strings.Builder
	lower := strings.ToLower(s)
	i, at := 0, 0
	redact := func(lo, hi int) {
		b.WriteString(s[at:lo])
		b.WriteString(Redacted)
		at, i = hi, hi
	}
	for i < len(s) {
		c := s[i]
		if !isWord(c) {
			i++
			continue
		}
		j := i
		for j < len(s) && isWord(s[j]) {
			j++
		}
		if i > 0 && isWord(s[i-1]) {
			i = j
			continue
		}
		word := lower[i:j]
		switch {
		case word == "bearer" || word == "basic":
			if k := skipSpaces(s, j); k > j && k < len(s) && isWord(s[k]) {
				redact(k, endOfValue(s, k))
				continue
			}
		case isSecretName(word):
			if k, ok := afterSeparator(s, j); ok {
				if e := endOfValue(s, k); e > k && !strings.HasPrefix(lower[k:], "bearer") && !strings.HasPrefix(lower[k:], "basic") {
					redact(k, e)
					continue
				}
			}
		case looksLikeKey(s[i:j]):
			redact(i, j)
			continue
		}
		i = j
	}
	if at == 0 {
		return s
	}
	b.WriteString(s[at:])
	return b.String()
}

func isSecretName(w string) bool {
	for _, n := range secretNames {
		if w == n || strings.HasSuffix(w, "_"+n) || strings.HasSuffix(w, "-"+n) {
			return true
		}
	}
	return false
}

// isWord reports a byte of a token: letters, digits, '-', '_', '.'.
func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// afterSeparator returns where the value after a name at s[:i] starts: past
// an optional closing quote, spaces, ':' or '=', spaces and an opening quote.
func afterSeparator(s string, i int) (int, bool) {
	if i < len(s) && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	i = skipSpaces(s, i)
	if i >= len(s) || (s[i] != ':' && s[i] != '=') {
		return 0, false
	}
	i = skipSpaces(s, i+1)
	if i < len(s) && (s[i] == '"' || s[i] == '\'' || s[i] == '\\') {
		for i < len(s) && (s[i] == '"' || s[i] == '\'' || s[i] == '\\') {
			i++
		}
	}
	return i, i < len(s)
}

// endOfValue returns the end of a value starting at i: the next quote,
// backslash, space, '&', ',', ';', '}' or the end.
func endOfValue(s string, i int) int {
	for i < len(s) && !strings.ContainsRune("\"'\\ \t\r\n&,;}", rune(s[i])) {
		i++
	}
	return i
}

// looksLikeKey reports a provider key shape or a long opaque token.
func looksLikeKey(w string) bool {
	if len(w) >= 12 && (strings.HasPrefix(w, "sk-") || strings.HasPrefix(w, "sk_") || strings.HasPrefix(w, "AIza") ||
		strings.HasPrefix(w, "xai-") || strings.HasPrefix(w, "gsk_") || strings.HasPrefix(w, "ghp_")) {
		return true
	}
	if len(w) >= 20 && strings.HasPrefix(w, "eyJ") {
		return true // a JWT
	}
	w = strings.TrimRight(w, ".")
	if len(w) < 32 || isUUID(w) {
		return false
	}
	var letter, digit bool
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c >= '0' && c <= '9':
			digit = true
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letter = true
		case c == '.':
			return false // a dotted name (a host, a model file), not a token
		}
	}
	return letter && digit
}

func isUUID(w string) bool {
	if len(w) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := w[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
