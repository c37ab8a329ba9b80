package wsbridge

import (
	"bytes"
	"errors"
)

// member is one member of a message's top-level object: its key as written
// (escapes left as they are) and its spans in the message.
type member struct {
	key []byte
	// start is where the key begins, valueStart where the value begins,
	// end where the value ends.
	start, valueStart, end int
}

// errNotObject is a message that is not one JSON object.
var errNotObject = errors.New("wsbridge: the message is not a JSON object")

// members returns the members of the JSON object b in order, reusing dst.
// It only finds where each value ends (strings are skipped to their closing
// quote, nested values by bracket depth); the body the turn sends is checked
// in full by the gateway, like any request's.
func members(dst []member, b []byte) ([]member, error) {
	dst = dst[:0]
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return dst, errNotObject
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return dst, trailing(b, i+1)
	}
	for {
		ks := i
		ke, ok := skipString(b, i)
		if !ok {
			return dst, errNotObject
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return dst, errNotObject
		}
		vs := skipWS(b, i+1)
		ve, ok := skipValue(b, vs)
		if !ok {
			return dst, errNotObject
		}
		dst = append(dst, member{key: b[ks+1 : ke-1], start: ks, valueStart: vs, end: ve})
		i = skipWS(b, ve)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipWS(b, i+1)
		case i < len(b) && b[i] == '}':
			return dst, trailing(b, i+1)
		default:
			return dst, errNotObject
		}
	}
}

// trailing checks that only white space follows the object.
func trailing(b []byte, i int) error {
	if skipWS(b, i) != len(b) {
		return errNotObject
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end (past the closing quote) of the string at i.
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		q := j + k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
	return 0, false
}

// skipValue returns the end of the value at i: a string, an object or
// array by bracket depth, else a literal up to the next delimiter.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, ok := skipString(b, j)
				if !ok {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j, j > i
}
