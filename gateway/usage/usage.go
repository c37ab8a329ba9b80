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
//   - Prompt caching: Anthropic's cache_read_input_tokens and
//     cache_creation_input_tokens (beside input_tokens, which leaves them
//     out: message_start carries them, and message_delta may repeat them),
//     OpenAI's prompt_tokens_details.cached_tokens (chat, completions) and
//     input_tokens_details.cached_tokens (Responses), part of the prompt
//     count; Gemini's cachedContentTokenCount, likewise part of it.
//
// Counts normalises them per request (see Counts).

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
	fieldCacheRead
	fieldCacheWrite
	// fieldDetailsCached is OpenAI's cached_tokens, read from inside
	// prompt_tokens_details or input_tokens_details (detailsNames).
	fieldDetailsCached
	nUsageFields
)

var usageNames = [nUsageFields]string{"total_tokens", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens",
	"totalTokenCount", "promptTokenCount", "candidatesTokenCount", "thoughtsTokenCount", "cachedContentTokenCount",
	"cache_read_input_tokens", "cache_creation_input_tokens", ""}

// detailsNames are the members of a usage object whose cached_tokens is
// fieldDetailsCached.
var detailsNames = [...]string{"prompt_tokens_details", "input_tokens_details"}

// decodeUsage reads the members of the usage object obj that usageFields
// names, as json.Unmarshal into *int64 fields did, without its reflection
// and allocations (it ran for every successful answer): an integer sets its
// field, null leaves it absent, any other value of a named member — a
// string, a fraction, an exponent — or malformed JSON rejects the whole
// object; other members (the *_details objects) are skipped. Names match
// exactly (json.Unmarshal also took other letter cases, which no upstream
// sends); a name with escapes is unescaped first. Of the details objects
// (detailsNames) only cached_tokens is read; a details object that is not
// an object, or a cached_tokens that is not an integer, reads as no
// cached count and leaves the rest of the usage as it is.
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
		field, details := -1, false
		for i, name := range usageNames {
			if name != "" && string(key) == name {
				field = i
				break
			}
		}
		for _, name := range detailsNames {
			details = details || string(key) == name
		}
		vs := s.i
		if !s.value(0) {
			return f, false
		}
		if details {
			if n, ok := detailsCached(obj[vs:s.i]); ok {
				f.v[fieldDetailsCached], f.has[fieldDetailsCached] = n, true
			}
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

// detailsCached reads the integer member cached_tokens of the details
// object obj (well-formed JSON: decodeUsage scanned it); ok is false when
// obj is no object or has no such integer.
func detailsCached(obj []byte) (n int64, ok bool) {
	s := scanner{b: obj}
	if !s.eat('{') {
		return 0, false
	}
	for {
		s.ws()
		ks, ke, esc, okStr := s.str()
		if !okStr {
			return n, ok
		}
		s.ws()
		s.eat(':')
		s.ws()
		vs := s.i
		if !s.value(0) {
			return 0, false
		}
		if !esc && string(obj[ks+1:ke-1]) == "cached_tokens" {
			v := obj[vs:s.i]
			if jsonInteger(v) {
				if x, err := strconv.ParseInt(string(v), 10, 64); err == nil {
					n, ok = x, true
				}
			} else {
				n, ok = 0, false
			}
		}
		s.ws()
		if !s.eat(',') {
			return n, ok
		}
	}
}

// jsonInteger reports whether v is a JSON number without fraction or
// exponent: an optional minus, then 0 or digits not starting with 0.
func jsonInteger(v []byte) bool {
	v = bytes.TrimPrefix(v, []byte("-"))
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
	// cached is the cached part of in (OpenAI's details, Gemini's count);
	// read and write are Anthropic's cache counts, beside in.
	cached      int64
	read, write int64
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
	if f.has[fieldDetailsCached] {
		u.cached = f.v[fieldDetailsCached]
	}
	if f.has[fieldCacheRead] {
		u.read = f.v[fieldCacheRead]
	}
	if f.has[fieldCacheWrite] {
		u.write = f.v[fieldCacheWrite]
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

// Counts is a response's usage, normalised across API styles.
type Counts struct {
	// Input is every prompt token the provider processed: OpenAI's and
	// Gemini's prompt count (which holds the cached part), Anthropic's
	// input_tokens + cache reads + cache writes.
	Input int64
	// CacheRead is the part of Input read from the prompt cache; CacheWrite
	// the part written to it (Anthropic only).
	CacheRead, CacheWrite int64
	Output                int64
	// RateTokens is what the style's own token limits count, and so what a
	// key's or connection's tpm and tpd are charged: Anthropic's input
	// limits leave cache reads out (Input − CacheRead + Output); OpenAI and
	// Gemini count the whole prompt (total_tokens or totalTokenCount when
	// sent, else Input + Output).
	RateTokens int64
	// Found is whether the response reported any usage at all.
	Found bool
}

// counts normalises u. Negative counts read as 0 and sums saturate.
func (u *usageSum) counts() Counts {
	in, out := max(u.in, 0), max(u.out, 0)
	read, write := max(u.read, 0), max(u.write, 0)
	c := Counts{Output: out, Found: u.found}
	if read > 0 || write > 0 {
		// Anthropic: input_tokens leaves the cache counts out.
		c.Input = addSat(addSat(in, read), write)
		c.CacheRead, c.CacheWrite = read, write
		c.RateTokens = addSat(addSat(in, write), out)
	} else {
		c.Input = in
		c.CacheRead = min(max(u.cached, 0), in)
		c.RateTokens = addSat(in, out)
	}
	if u.hasTotal {
		c.RateTokens = max(u.total, 0)
	}
	return c
}

// addSat is a + b for counts ≥ 0, saturating at the largest int64.
func addSat(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
