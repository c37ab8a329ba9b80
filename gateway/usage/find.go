package usage

import "bytes"

// jsonUsage is the incremental scanner. It finds `"usage": {…}` members
// (want: "usageMetadata" for Gemini) whose key sits at depth ≤ maxKeyDepth
// (1 = the top-level object) and reports each object's bytes with the key's
// depth.
type jsonUsage struct {
	maxKeyDepth int
	want        string // the key: keyUsage or keyUsageMetadata
	// tap is told of each usage object (Tap.found): a pointer, not a
	// func, as the method value would be one more allocation per request.
	tap *Tap

	depth      int
	inStr, esc bool
	key        [len(keyUsageMetadata)]byte // the current string, if it could still be want
	keyN       int                         // bytes seen of the current string (capped at len(want)+1)
	afterKey   uint8                       // 1: want just closed; 2: and its ':' seen
	capturing  bool
	capDepth   int
	overflow   bool
	buf        []byte
	// small is buf's first storage: a usage object is about 100 bytes, so
	// capturing one allocates nothing beyond the tap.
	small [192]byte
}

func (j *jsonUsage) reset() {
	j.depth, j.inStr, j.esc, j.keyN, j.afterKey = 0, false, false, 0, 0
	j.capturing, j.overflow = false, false
	j.buf = j.buf[:0]
}

func (j *jsonUsage) feed(p []byte) {
	for i := 0; i < len(p); i++ {
		if j.skippable() {
			// Inside a string that can no longer be the key "usage" only a
			// quote or a backslash changes the state: skip to it.
			k := stringStop(p[i:], false)
			if k < 0 {
				return
			}
			i += k
		}
		j.feedByte(p[i])
	}
}

// skippable reports whether the scanner is inside a string that is not
// being captured and can no longer be the key "usage": every byte but a
// quote or a backslash leaves its state as it is. Most of a response (its
// text) is such strings, so feed and scanSSE skip them with IndexAny instead
// of going byte by byte.
func (j *jsonUsage) skippable() bool {
	return j.inStr && !j.esc && !j.capturing && j.keyN > len(j.want)
}

// The keys a usage object is found under.
const (
	keyUsage         = "usage"
	keyUsageMetadata = "usageMetadata"
)

// stringStop returns the index of the first quote or backslash in b (with
// lines, also of the first LF: an event stream's line ends even inside a
// string; a CR changes no state there), -1 if there is none. IndexByte is
// vectorised; each later search only looks before the earliest stop so far.
func stringStop(b []byte, lines bool) int {
	k := bytes.IndexByte(b, '"')
	if k < 0 {
		k = len(b)
	}
	if e := bytes.IndexByte(b[:k], '\\'); e >= 0 {
		k = e
	}
	if lines {
		if e := bytes.IndexByte(b[:k], '\n'); e >= 0 {
			k = e
		}
	}
	if k == len(b) {
		return -1
	}
	return k
}

func (j *jsonUsage) feedByte(c byte) {
	if j.capturing {
		if len(j.buf) < maxUsageObject {
			j.buf = append(j.buf, c)
		} else {
			j.overflow = true
		}
	}
	if j.inStr {
		switch {
		case j.esc:
			j.esc = false
			j.keyN = len(j.want) + 1 // an escaped key is never taken for want
		case c == '\\':
			j.esc = true
		case c == '"':
			j.inStr = false
			if j.keyN == len(j.want) && string(j.key[:j.keyN]) == j.want && !j.capturing && j.depth >= 1 && j.depth <= j.maxKeyDepth {
				j.afterKey = 1
			}
		default:
			if j.keyN < len(j.want) {
				j.key[j.keyN] = c
			}
			if j.keyN <= len(j.want) {
				j.keyN++
			}
		}
		return
	}
	switch c {
	case ' ', '\t', '\n', '\r':
		return
	case '"':
		j.inStr, j.keyN, j.afterKey = true, 0, 0
		return
	case ':':
		if j.afterKey == 1 {
			j.afterKey = 2
			return
		}
	case '{':
		j.depth++
		if j.afterKey == 2 && !j.capturing {
			j.capturing, j.capDepth, j.overflow = true, j.depth, false
			j.buf = append(j.buf[:0], '{')
		}
	case '[':
		j.depth++
	case '}':
		if j.capturing && j.depth == j.capDepth {
			j.capturing = false
			if !j.overflow && j.tap != nil {
				j.tap.found(j.buf, j.capDepth-1)
			}
		}
		j.depth--
	case ']':
		j.depth--
	}
	j.afterKey = 0
}
