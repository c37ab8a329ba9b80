package session

import (
	"bytes"

	"github.com/cespare/xxhash/v2"
)

// Fingerprint is the loop fingerprint of a request (DESIGN.md, "Runaway
// guards"): a hash of its last two messages, the previous assistant turn and
// the new user or tool-result turn, with tool-call ids removed — the string
// values of the members "id", "tool_call_id", "tool_use_id" and "call_id",
// wherever they are nested — so that an agent calling one tool with one
// result again and again gives one fingerprint although every call has an
// id of its own. prev and last are raw JSON (the body scan's ranges); only
// these bytes are read, nothing is decoded or allocated.
func Fingerprint(prev, last []byte) uint64 {
	var d xxhash.Digest
	d.Reset()
	writeStripped(&d, prev)
	_, _ = d.Write([]byte{0})
	writeStripped(&d, last)
	return d.Sum64()
}

// writeStripped writes b to d without the string values of tool-call id
// members.
func writeStripped(d *xxhash.Digest, b []byte) {
	from := 0 // start of the bytes not yet written
	for i := 0; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			break
		}
		i += q
		ks := i
		i = stringEnd(b, i)
		ke := i
		j := skipWS(b, i)
		if j >= len(b) || b[j] != ':' || !idMember(b[ks+1:ke-1]) {
			continue
		}
		j = skipWS(b, j+1)
		if j >= len(b) || b[j] != '"' {
			continue
		}
		// Write up to the value, then skip the value.
		_, _ = d.Write(b[from:j])
		i = stringEnd(b, j)
		from = i
	}
	_, _ = d.Write(b[from:])
}

// stringEnd is the index just past the JSON string that opens at b[i] (the
// end of b when it does not close): the next quote not escaped, found with
// IndexByte rather than byte by byte (tool results run to kilobytes).
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return len(b)
		}
		i += q
		n := 0 // backslashes right before the quote
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
	return len(b)
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// idMember reports whether a member name (raw, unquoted) names a tool-call id.
func idMember(name []byte) bool {
	switch string(name) {
	case "id", "tool_call_id", "tool_use_id", "call_id":
		return true
	}
	return false
}
