package usage

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Token usage is read from upstream responses while they are copied to the
// client, never by buffering a whole response: a byte-at-a-time JSON scanner
// follows the structure (depth, strings, escapes) across reads and captures
// only the small "usage" objects it meets, which are then decoded.
//
//   - JSON bodies: the top-level "usage" (OpenAI chat, completions,
//     embeddings and responses; Anthropic messages).
//   - SSE streams: each event's data is scanned on its own, and usage objects
//     up to one level down count too: an OpenAI chunk's "usage", Anthropic's
//     message_start "message.usage" and message_delta "usage", the Responses
//     API's "response.usage". Later values of a field replace earlier ones
//     (Anthropic's output_tokens is cumulative).
//   - Gemini (NewGeminiTap): "usageMetadata" instead of "usage", at the top
//     of a response or of a stream's chunk (an SSE event's data, or an
//     element of the JSON array a stream without alt=sse is); input is
//     promptTokenCount, output candidatesTokenCount + thoughtsTokenCount,
//     cached cachedContentTokenCount, each chunk's counts replacing the
//     last's.
//
// The total is total_tokens (Gemini: totalTokenCount) when the upstream
// sends it, else prompt_tokens + completion_tokens, else input_tokens +
// output_tokens.

// maxUsageObject bounds a captured usage object; a larger one is ignored.
const maxUsageObject = 4 << 10

// maxEventStrip bounds an SSE event held back while stripping; a larger
// event ends stripping for the rest of the stream.
const maxEventStrip = 1 << 20

// usageFields is one decoded usage object: each field's value and whether
// the object had it (as an integer; null counts as absent).
type usageFields struct {
	v   [nUsageFields]int64
	has [nUsageFields]bool
}

// The fields of usageFields, by their JSON names in usageNames.
const (
	fieldTotal = iota
	fieldPrompt
	fieldCompletion
	fieldInput
	fieldOutput
	fieldGeminiTotal
	fieldGeminiPrompt
	fieldGeminiCandidates
	fieldGeminiThoughts
	fieldGeminiCached
	nUsageFields
)

var usageNames = [nUsageFields]string{"total_tokens", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens",
	"totalTokenCount", "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "cachedContentTokenCount"}

// decodeUsage reads the members of the usage object obj that usageFields
// names, as json.Unmarshal into *int64 fields did, without its reflection
// and allocations (it ran for every successful answer): an integer sets its
// field, null leaves it absent, any other value of a named member — a
// string, a fraction, an exponent — or malformed JSON rejects the whole
// object; other members (the *_details objects) are skipped. Names match
// exactly (json.Unmarshal also took other letter cases, which no upstream
// sends); a name with escapes is unescaped first.
func decodeUsage(obj []byte) (f usageFields, ok bool) {
	s := scanner{b: obj}
	s.ws()
	if !s.eat('{') {
		return f, false
	}
	s.ws()
	if s.eat('}') {
		return f, true
	}
	for {
		s.ws()
		ks, ke, esc, ok := s.str()
		if !ok {
			return f, false
		}
		s.ws()
		if !s.eat(':') {
			return f, false
		}
		s.ws()
		key := obj[ks+1 : ke-1]
		if esc {
			var k string
			if json.Unmarshal(obj[ks:ke], &k) != nil {
				return f, false
			}
			key = []byte(k)
		}
		field := -1
		for i, name := range usageNames {
			if string(key) == name {
				field = i
				break
			}
		}
		vs := s.i
		if !s.value(0) {
			return f, false
		}
		if field >= 0 {
			v := obj[vs:s.i]
			switch {
			case string(v) == "null":
				f.has[field] = false
			case !jsonInteger(v):
				return f, false
			default:
				n, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					return f, false
				}
				f.v[field], f.has[field] = n, true
			}
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if !s.eat('}') {
			return f, false
		}
		s.ws()
		return f, s.i == len(obj)
	}
}

// jsonInteger reports whether v is a JSON number without fraction or
// exponent: an optional minus, then 0 or digits not starting with 0.
func jsonInteger(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 || (v[0] == '0' && len(v) > 1) {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// usageSum merges the usage objects of one response.
type usageSum struct {
	total, in, out int64
	cached         int64
	// candidates and thoughts are Gemini's two parts of out.
	candidates, thoughts int64
	hasTotal             bool
	found                bool
}

func (u *usageSum) merge(f usageFields) {
	u.found = true
	if f.has[fieldTotal] {
		u.total, u.hasTotal = f.v[fieldTotal], true
	}
	if f.has[fieldGeminiTotal] {
		u.total, u.hasTotal = f.v[fieldGeminiTotal], true
	}
	if f.has[fieldGeminiPrompt] {
		u.in = f.v[fieldGeminiPrompt]
	}
	if f.has[fieldGeminiCandidates] || f.has[fieldGeminiThoughts] {
		if f.has[fieldGeminiCandidates] {
			u.candidates = f.v[fieldGeminiCandidates]
		}
		if f.has[fieldGeminiThoughts] {
			u.thoughts = f.v[fieldGeminiThoughts]
		}
		u.out = u.candidates + u.thoughts
	}
	if f.has[fieldGeminiCached] {
		u.cached = f.v[fieldGeminiCached]
	}
	if f.has[fieldPrompt] {
		u.in = f.v[fieldPrompt]
	}
	if f.has[fieldInput] {
		u.in = f.v[fieldInput]
	}
	if f.has[fieldCompletion] {
		u.out = f.v[fieldCompletion]
	}
	if f.has[fieldOutput] {
		u.out = f.v[fieldOutput]
	}
}

// tokens is the response's token count, 0 when it reported none.
func (u *usageSum) tokens() int64 {
	if u.hasTotal {
		return max(u.total, 0)
	}
	return max(u.in+u.out, 0)
}

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
// lines, also of the first CR or LF), -1 if there is none. IndexByte is
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
		if e := bytes.IndexByte(b[:k], '\r'); e >= 0 {
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
