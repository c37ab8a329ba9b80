package httpkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// WriteJSON renders v to a buffer and only then writes status, headers and body, so an
// encoding failure can still become a clean 500. A non-empty etag is sent as ETag.
func WriteJSON(w http.ResponseWriter, status int, v any, etag string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("handlers: encode response: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	if etag != "" {
		h.Set("ETag", etag)
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}

// IsJSONNumber reports whether s is a number in JSON's own syntax.
func IsJSONNumber(s string) bool {
	if s == "" || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
		return false
	}
	var v json.Number
	return json.Unmarshal([]byte(s), &v) == nil
}
