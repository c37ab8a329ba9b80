package usage

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Request is what the gateway needs from a request body: the model it names
// and whether it asks for a stream. Found by scanning the top-level object
// rather than decoding the whole body, which would cost a full allocation of
// every message in the conversation.
type Request struct {
	// Model is the value of the top-level "model".
	Model string
	// modelStart and modelEnd delimit the model's JSON string literal, quotes
	// included, so the value can be replaced without re-encoding anything else
	// (modelEnd 0: no model yet; a value never ends at 0, where the body's
	// '{' is).
	modelStart, modelEnd int
	// Stream is the top-level "stream".
	Stream bool
	// objStart is the offset just past the body's opening brace.
	objStart int
	// streamOptStart and streamOptEnd delimit the value of a top-level
	// "stream_options" (end 0 when absent).
	streamOptStart, streamOptEnd int
	// IncludeUsage is stream_options.include_usage.
	IncludeUsage bool
	// MaxOutput is the output bound the request sets, the largest of a
	// top-level max_tokens, max_completion_tokens or max_output_tokens and
	// Gemini's generationConfig.maxOutputTokens that is a positive integer;
	// 0 when none is (a budget reservation then assumes the settings'
	// defaultOutputReserve).
	MaxOutput int64
	// Choices is how many answers the request asks for: a top-level n
	// (OpenAI) or Gemini's generationConfig.candidateCount that is a
	// positive integer; 0 when none is (one).
	Choices int64
	// The byte ranges of the prompt's parts that every turn of a
	// conversation shares (end 0: absent), for affinity (Parts): the system
	// prompt (Anthropic's "system", the Responses API's "instructions"),
	// "tools", and the first element of "messages" (or of "input", or an
	// "input" string).
	sysStart, sysEnd, toolsStart, toolsEnd, firstStart, firstEnd int
	// PromptCacheKey is OpenAI's top-level "prompt_cache_key" and
	// MetadataUserID Anthropic's "metadata.user_id", when they are strings
	// without escapes: session ids (package session).
	PromptCacheKey, MetadataUserID string
	// MultiTurn: "messages" (or an "input" array) holds more than one
	// element, so the request continues a conversation.
	MultiTurn bool
	// The byte ranges of the last two elements of "messages" (or of an
	// "input" array), end 0 when absent, for loop detection (LastTwo).
	prevStart, prevEnd, lastStart, lastEnd int
}

// LastTwo returns the last two messages of body (the body Scan read): the
// one before the last and the last, nil for those it lacks (a conversation
// of one message has no prev); subslices of body, nothing decoded.
func (r *Request) LastTwo(body []byte) (prev, last []byte) {
	part := func(s, e int) []byte {
		if e <= s || e > len(body) {
			return nil
		}
		return body[s:e]
	}
	return part(r.prevStart, r.prevEnd), part(r.lastStart, r.lastEnd)
}

// Parts returns the system prompt, tools and first message of body (the body
// Scan read), nil for those it lacks: subslices of body, nothing decoded.
func (r *Request) Parts(body []byte) (system, tools, first []byte) {
	part := func(s, e int) []byte {
		if e <= s || e > len(body) {
			return nil
		}
		return body[s:e]
	}
	return part(r.sysStart, r.sysEnd), part(r.toolsStart, r.toolsEnd), part(r.firstStart, r.firstEnd)
}

// Errors from Scan; the gateway answers them with 400.
var (
	ErrNotObject = errors.New("usage: request body is not a JSON object")
	ErrSyntax    = errors.New("usage: request body is not valid JSON")
	ErrNoModel   = errors.New("usage: request body has no string \"model\"")
	ErrDupModel  = errors.New("usage: request body has more than one \"model\"")
	// ErrFoldedModel is a top-level key that is not "model" but equals it
	// case-insensitively ("MODEL", "Model"): an upstream whose JSON decoder
	// matches keys that way (Go's encoding/json does) could serve that model
	// instead of the one Gatehouse checked.
	ErrFoldedModel = errors.New("usage: request body has a key that case-folds to \"model\"")
)

// Scan finds the top-level "model" (a string) and "stream" (a boolean)
// members of the JSON object b. Values of other members are skipped with only
// enough checking to find where they end; the upstream validates the rest.
func Scan(b []byte) (Request, error) {
	var info Request
	s := scanner{b: b}
	s.ws()
	if !s.eat('{') {
		return info, ErrNotObject
	}
	info.objStart = s.i
	s.ws()
	if s.eat('}') {
		return info, ErrNoModel
	}
	for {
		s.ws()
		ks, ke, esc, ok := s.str()
		if !ok {
			return info, ErrSyntax
		}
		s.ws()
		if !s.eat(':') {
			return info, ErrSyntax
		}
		s.ws()
		key := s.b[ks+1 : ke-1]
		if esc {
			var k string
			if json.Unmarshal(s.b[ks:ke], &k) != nil {
				return info, ErrSyntax
			}
			key = []byte(k)
		}
		switch string(key) {
		case "model":
			vs, ve, vesc, ok := s.str()
			if !ok {
				if s.i < len(s.b) && s.b[s.i] != '"' {
					return info, ErrNoModel
				}
				return info, ErrSyntax
			}
			if info.modelEnd != 0 {
				return info, ErrDupModel
			}
			info.modelStart, info.modelEnd = vs, ve
			if vesc {
				// Decoded into a local of this branch: &info itself would
				// move info to the heap on every request.
				var m string
				if json.Unmarshal(s.b[vs:ve], &m) != nil {
					return info, ErrSyntax
				}
				info.Model = m
			} else {
				info.Model = string(s.b[vs+1 : ve-1])
			}
		case "stream":
			switch {
			case s.lit("true"):
				info.Stream = true
			case s.lit("false"), s.lit("null"):
				info.Stream = false
			default:
				if !s.value(0) {
					return info, ErrSyntax
				}
			}
		case "n":
			vs := s.i
			if !s.value(0) {
				return info, ErrSyntax
			}
			if n, ok := positiveInt(s.b[vs:s.i]); ok {
				info.Choices = n
			}
		case "max_tokens", "max_completion_tokens", "max_output_tokens":
			vs := s.i
			if !s.value(0) {
				return info, ErrSyntax
			}
			if n, ok := positiveInt(s.b[vs:s.i]); ok {
				info.MaxOutput = max(info.MaxOutput, n)
			}
		case "generationConfig":
			vs := s.i
			if !s.value(0) {
				return info, ErrSyntax
			}
			var gc struct {
				MaxOutputTokens json.RawMessage `json:"maxOutputTokens"`
				CandidateCount  json.RawMessage `json:"candidateCount"`
			}
			if s.b[vs] == '{' && json.Unmarshal(s.b[vs:s.i], &gc) == nil {
				if n, ok := positiveInt(gc.MaxOutputTokens); ok {
					info.MaxOutput = max(info.MaxOutput, n)
				}
				if n, ok := positiveInt(gc.CandidateCount); ok {
					info.Choices = n
				}
			}
		case "system", "instructions", "tools":
			vs := s.i
			if !s.value(0) {
				return info, ErrSyntax
			}
			if string(key) == "tools" {
				info.toolsStart, info.toolsEnd = vs, s.i
			} else {
				info.sysStart, info.sysEnd = vs, s.i
			}
		case "messages", "input":
			vs := s.i
			if s.i < len(s.b) && s.b[s.i] == '[' {
				fs, fe, n, ok := s.firstElement()
				if !ok {
					return info, ErrSyntax
				}
				info.firstStart, info.firstEnd, info.MultiTurn = fs, fe, n > 1
				info.prevStart, info.prevEnd, info.lastStart, info.lastEnd = s.prevS, s.prevE, s.lastS, s.lastE
			} else {
				if !s.value(0) {
					return info, ErrSyntax
				}
				if s.b[vs] == '"' {
					info.firstStart, info.firstEnd = vs, s.i
				}
			}
		case "prompt_cache_key":
			vs, ve, esc, ok := s.str()
			if !ok {
				if !s.value(0) {
					return info, ErrSyntax
				}
			} else if !esc {
				info.PromptCacheKey = string(s.b[vs+1 : ve-1])
			}
		case "metadata":
			vs := s.i
			if !s.value(0) {
				return info, ErrSyntax
			}
			info.MetadataUserID = metadataUserID(s.b[vs:s.i])
		case "stream_options":
			vs := s.i
			if !s.value(0) {
				return info, ErrSyntax
			}
			info.streamOptStart, info.streamOptEnd = vs, s.i
			var so struct {
				IncludeUsage bool `json:"include_usage"`
			}
			// Not an object, or include_usage not a boolean: the upstream
			// will say so; for us it is "not asked for".
			if s.b[vs] == '{' && json.Unmarshal(s.b[vs:s.i], &so) == nil {
				info.IncludeUsage = so.IncludeUsage
			}
		default:
			if foldsToModel(key) {
				return info, ErrFoldedModel
			}
			if !s.value(0) {
				return info, ErrSyntax
			}
		}
		s.ws()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			break
		}
		return info, ErrSyntax
	}
	s.ws()
	if s.i != len(s.b) {
		return info, ErrSyntax
	}
	if info.modelEnd == 0 || info.Model == "" {
		return info, ErrNoModel
	}
	return info, nil
}

// firstElement skips the array at s.i and returns the span of its first
// element (0, 0 for an empty array) and its number of elements; it leaves the
// spans of the last two in s.prevS, s.prevE, s.lastS and s.lastE.
func (s *scanner) firstElement() (start, end, n int, ok bool) {
	s.i++ // '['
	s.prevS, s.prevE, s.lastS, s.lastE = 0, 0, 0, 0
	s.ws()
	if s.eat(']') {
		return 0, 0, 0, true
	}
	for ; ; n++ {
		s.ws()
		vs := s.i
		if !s.value(1) {
			return 0, 0, 0, false
		}
		if n == 0 {
			start, end = vs, s.i
		}
		s.prevS, s.prevE, s.lastS, s.lastE = s.lastS, s.lastE, vs, s.i
		s.ws()
		if s.eat(',') {
			continue
		}
		return start, end, n + 1, s.eat(']')
	}
}

// metadataUserID returns the string user_id of the metadata object v ("" when
// absent or not a plain string); v is small, so scanning it costs little.
func metadataUserID(v []byte) string {
	s := scanner{b: v}
	if !s.eat('{') {
		return ""
	}
	for {
		s.ws()
		ks, ke, _, ok := s.str()
		if !ok {
			return ""
		}
		s.ws()
		if !s.eat(':') {
			return ""
		}
		s.ws()
		if string(s.b[ks:ke]) == `"user_id"` {
			vs, ve, esc, ok := s.str()
			if !ok || esc {
				return ""
			}
			return string(s.b[vs+1 : ve-1])
		}
		if !s.value(1) {
			return ""
		}
		s.ws()
		if !s.eat(',') {
			return ""
		}
	}
}

// positiveInt reads v, a JSON value, as a positive integer of at most 18
// digits; anything else is not an output bound (the upstream says so).
func positiveInt(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n > 0
}

// foldsToModel reports whether key equals "model" under Unicode simple case
// folding, as the decoders that match keys case-insensitively compare them
// (a non-ASCII letter such as U+212A KELVIN SIGN folds to an ASCII one).
func foldsToModel(key []byte) bool {
	return bytes.EqualFold(key, modelKey)
}

var modelKey = []byte("model")

// Describe is the client-facing message for a Scan error.
func Describe(err error) string {
	switch {
	case errors.Is(err, ErrNoModel):
		return `the request body must be a JSON object with a string "model"`
	case errors.Is(err, ErrDupModel):
		return `the request body names "model" more than once`
	case errors.Is(err, ErrFoldedModel):
		return `the request body has a key that differs from "model" only in case; send "model" once, in lower case`
	case errors.Is(err, ErrNotObject):
		return "the request body must be a JSON object"
	}
	return "the request body is not valid JSON"
}
