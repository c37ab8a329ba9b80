package usage

import (
	"bytes"
	"sync"
)

// Tap watches a response body on its way to the client and sums the
// usage it reports. For streams it can also strip the usage the gateway
// asked for on the client's behalf: an event with a top-level usage object
// and no choices is dropped, one that also carries choices loses only its
// usage member (stripUsage).
type Tap struct {
	sum   usageSum
	js    jsonUsage
	sse   bool
	strip bool

	inLine   bool // the current line has a byte other than '\r'
	prefix   int  // bytes of "data:" matched at the line start, -1 on mismatch
	inData   bool // in the payload of a data: line
	dataSeen bool // the current event had a data line already

	ev     []byte // strip: the current event so far
	out    []byte // strip: what to send for the latest feed
	dropEv bool   // strip: the current event carries top-level usage (stripUsage decides)
}

// taps recycles taps (release): one per answered request otherwise.
var taps = sync.Pool{New: func() any { return new(Tap) }}

// NewTap returns a tap for a JSON body (sse false) or an event stream.
// strip removes the top-level usage the gateway added (stripUsage).
func NewTap(sse, strip bool) *Tap {
	t := taps.Get().(*Tap)
	*t = Tap{sse: sse, strip: strip && sse}
	t.js.maxKeyDepth = 1
	if sse {
		t.js.maxKeyDepth = 2
	}
	t.js.want = keyUsage
	t.js.tap = t
	t.js.buf = t.js.small[:0]
	return t
}

// NewGeminiTap returns a tap for a Gemini answer: a JSON body (sse false),
// which may be the JSON array of a stream without alt=sse, or an event
// stream. It reads "usageMetadata" at the top of a response or of an array
// element, and strips nothing.
func NewGeminiTap(sse bool) *Tap {
	t := taps.Get().(*Tap)
	*t = Tap{sse: sse}
	t.js.maxKeyDepth = 2
	t.js.want = keyUsageMetadata
	t.js.tap = t
	t.js.buf = t.js.small[:0]
	return t
}

// Release gives t back for reuse: the body has been relayed (relay runs on
// the attempt's goroutine) and its sum read; t must not be used after.
// Its buffers go with it: a pooled tap must not pin a large event's buffer.
func (t *Tap) Release() {
	*t = Tap{}
	taps.Put(t)
}

func (t *Tap) found(obj []byte, keyDepth int) {
	f, ok := decodeUsage(obj)
	if !ok {
		return
	}
	t.sum.merge(f)
	if keyDepth == 1 {
		t.dropEv = true
	}
}

// Strips reports whether t may change the body (a stream it strips usage
// from): its Content-Length no longer holds. A nil tap never does.
func (t *Tap) Strips() bool { return t != nil && t.strip }

// Feed watches p and returns the bytes to send to the client: p itself,
// unless stripping, when complete events are released as they end.
func (t *Tap) Feed(p []byte) []byte {
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

// Flushed returns what a stripping tap still holds at the end of the
// stream: an unterminated last event, unless it is the usage event. A nil
// tap holds nothing.
func (t *Tap) Flushed() []byte {
	if t == nil || !t.strip {
		return nil
	}
	if t.dropEv {
		return stripUsage(t.ev)
	}
	return t.ev
}

// scanSSE follows the event stream's lines, feeding data payloads to the
// JSON scanner; a blank line ends an event.
func (t *Tap) scanSSE(p []byte) {
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
			// bytes are in a line already begun (with "data:").
			k := stringStop(p[i:], true)
			if k < 0 {
				k = len(p) - i
			}
			if t.strip {
				t.ev = append(t.ev, p[i:i+k]...)
			}
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
			if !t.inLine {
				t.endEvent()
			} else if t.inData {
				t.js.feedByte('\n')
			}
			t.inLine, t.prefix, t.inData = false, 0, false
			continue
		case c == '\r':
			continue
		}
		t.inLine = true
		if t.inData {
			t.js.feedByte(c)
			continue
		}
		if t.prefix >= 0 { // 5 is inData, gone on above
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
// a new line, no data seen, nothing held. The rest follows: a line not begun
// has matched nothing of "data:" and is in no payload; the JSON scanner is
// fed only data and reset with dataSeen at each event's end, and only data
// finds a usage object (dropEv).
func (t *Tap) atEventStart() bool {
	return !t.inLine && !t.dataSeen && len(t.ev) == 0
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

func (t *Tap) endEvent() {
	t.js.reset()
	if t.strip {
		if !t.dropEv {
			t.out = append(t.out, t.ev...)
		} else {
			t.out = append(t.out, stripUsage(t.ev)...)
		}
		t.ev = t.ev[:0]
	}
	t.dropEv, t.dataSeen = false, false
}

// Tokens is the response's rate count so far (Counts.RateTokens; 0 when
// it reported none).
func (t *Tap) Tokens() int64 { return t.sum.counts().RateTokens }

// Counts is the usage the response reported so far, normalised.
func (t *Tap) Counts() Counts { return t.sum.counts() }
