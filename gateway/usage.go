package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
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
//
// The total is total_tokens when the upstream sends it, else
// prompt_tokens + completion_tokens, else input_tokens + output_tokens.

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
	nUsageFields
)

var usageNames = [nUsageFields]string{"total_tokens", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"}

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
	hasTotal       bool
	found          bool
}

func (u *usageSum) merge(f usageFields) {
	u.found = true
	if f.has[fieldTotal] {
		u.total, u.hasTotal = f.v[fieldTotal], true
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
// whose key sits at depth ≤ maxKeyDepth (1 = the top-level object) and
// reports each object's bytes with the key's depth.
type jsonUsage struct {
	maxKeyDepth int
	// tap is told of each usage object (usageTap.found): a pointer, not a
	// func, as the method value would be one more allocation per request.
	tap *usageTap

	depth      int
	inStr, esc bool
	key        [5]byte // the current string, if it could still be "usage"
	keyN       int     // bytes seen of the current string (capped at 6)
	afterKey   uint8   // 1: "usage" just closed; 2: and its ':' seen
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
	return j.inStr && !j.esc && !j.capturing && j.keyN >= 6
}

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
			j.keyN = 6 // an escaped key is never taken for "usage"
		case c == '\\':
			j.esc = true
		case c == '"':
			j.inStr = false
			if j.keyN == 5 && string(j.key[:]) == "usage" && !j.capturing && j.depth >= 1 && j.depth <= j.maxKeyDepth {
				j.afterKey = 1
			}
		default:
			if j.keyN < 5 {
				j.key[j.keyN] = c
			}
			if j.keyN < 6 {
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

// usageTap watches a response body on its way to the client and sums the
// usage it reports. For streams it can also strip the events that carry a
// top-level usage object: the final OpenAI usage chunk the gateway asked
// for on the client's behalf.
type usageTap struct {
	sum   usageSum
	js    jsonUsage
	sse   bool
	strip bool

	lineLen  int  // bytes of the current line, '\r' not counted
	prefix   int  // bytes of "data:" matched at the line start, -1 on mismatch
	inData   bool // in the payload of a data: line
	dataSeen bool // the current event had a data line already

	ev     []byte // strip: the current event so far
	out    []byte // strip: what to send for the latest feed
	dropEv bool   // strip: the current event carries top-level usage
}

// usageTaps recycles taps (release): one per answered request otherwise.
var usageTaps = sync.Pool{New: func() any { return new(usageTap) }}

// newUsageTap returns a tap for a JSON body (sse false) or an event stream.
// strip drops the events whose data has a top-level usage object.
func newUsageTap(sse, strip bool) *usageTap {
	t := usageTaps.Get().(*usageTap)
	*t = usageTap{sse: sse, strip: strip && sse}
	t.js.maxKeyDepth = 1
	if sse {
		t.js.maxKeyDepth = 2
	}
	t.js.tap = t
	t.js.buf = t.js.small[:0]
	return t
}

// release gives t back for reuse: the body has been relayed (relay runs on
// the attempt's goroutine) and its sum read; t must not be used after.
func (t *usageTap) release() { usageTaps.Put(t) }

func (t *usageTap) found(obj []byte, keyDepth int) {
	f, ok := decodeUsage(obj)
	if !ok {
		return
	}
	t.sum.merge(f)
	if keyDepth == 1 {
		t.dropEv = true
	}
}

// feed watches p and returns the bytes to send to the client: p itself,
// unless stripping, when complete events are released as they end.
func (t *usageTap) feed(p []byte) []byte {
	if !t.sse {
		t.js.feed(p)
		return p
	}
	if !t.strip {
		t.scanSSE(p)
		return p
	}
	t.out = t.out[:0]
	t.scanSSE(p)
	if t.strip && len(t.ev) > maxEventStrip {
		// An event this large is no usage chunk: stop holding events back.
		t.out = append(t.out, t.ev...)
		t.ev, t.strip = nil, false
	}
	return t.out
}

// flushed returns what a stripping tap still holds at the end of the
// stream: an unterminated last event, unless it is the usage event. A nil
// tap holds nothing.
func (t *usageTap) flushed() []byte {
	if t == nil || !t.strip || t.dropEv {
		return nil
	}
	return t.ev
}

// scanSSE follows the event stream's lines, feeding data payloads to the
// JSON scanner; a blank line ends an event.
func (t *usageTap) scanSSE(p []byte) {
	for i := 0; i < len(p); i++ {
		if t.atEventStart() && p[i] != '\n' && p[i] != '\r' {
			// A whole event in p that does not mention "usage" anywhere
			// cannot carry a usage object: pass it on without scanning it.
			if e := sseEventEnd(p[i:]); e > 0 && !bytes.Contains(p[i:i+e], usageKey) {
				if t.strip {
					t.ev = append(t.ev, p[i:i+e]...)
				}
				t.endEvent()
				i += e - 1
				continue
			}
		}
		if t.inData && t.js.skippable() {
			// As in jsonUsage.feed; a line end matters here too. The skipped
			// bytes only lengthen the line.
			k := stringStop(p[i:], true)
			if k < 0 {
				k = len(p) - i
			}
			if t.strip {
				t.ev = append(t.ev, p[i:i+k]...)
			}
			t.lineLen += k
			if i += k; i == len(p) {
				return
			}
		}
		c := p[i]
		if t.strip {
			t.ev = append(t.ev, c)
		}
		switch {
		case c == '\n':
			if t.lineLen == 0 {
				t.endEvent()
			} else if t.inData {
				t.js.feedByte('\n')
			}
			t.lineLen, t.prefix, t.inData = 0, 0, false
			continue
		case c == '\r':
			continue
		}
		t.lineLen++
		if t.inData {
			t.js.feedByte(c)
			continue
		}
		if t.prefix >= 0 && t.prefix < 5 {
			if c == "data:"[t.prefix] {
				t.prefix++
				if t.prefix == 5 {
					t.inData = true
					t.dataSeen = true
				}
			} else {
				t.prefix = -1
			}
		}
	}
}

// usageKey is what every usage member has in it.
var usageKey = []byte("usage")

// atEventStart reports whether the scan stands at the start of an event:
// a new line, no data seen, nothing held, the JSON scanner reset.
func (t *usageTap) atEventStart() bool {
	return t.lineLen == 0 && t.prefix == 0 && !t.inData && !t.dataSeen && len(t.ev) == 0 && !t.dropEv &&
		t.js.depth == 0 && !t.js.inStr && !t.js.capturing && t.js.afterKey == 0
}

// sseEventEnd returns the length of b's first event, up to and including
// the line end of the blank line that ends it (lines end with LF; a CR
// before it does not count, as in scanSSE), or -1 when b holds no whole
// event. b starts a line that is not blank.
func sseEventEnd(b []byte) int {
	for i := 0; ; {
		k := bytes.IndexByte(b[i:], '\n')
		if k < 0 {
			return -1
		}
		j := i + k + 1
		for j < len(b) && b[j] == '\r' {
			j++
		}
		if j >= len(b) {
			return -1
		}
		if b[j] == '\n' {
			return j + 1
		}
		i = j
	}
}

func (t *usageTap) endEvent() {
	t.js.reset()
	if t.strip {
		if !t.dropEv {
			t.out = append(t.out, t.ev...)
		}
		t.ev = t.ev[:0]
	}
	t.dropEv, t.dataSeen = false, false
}

// tokens is the usage the response reported so far (0 when none).
func (t *usageTap) tokens() int64 { return t.sum.tokens() }
