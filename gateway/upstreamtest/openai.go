package upstreamtest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
)

// appendOpenAIUsage appends an OpenAI usage object: total split, or the
// behaviour's cache counts (cached_tokens in prompt_tokens_details).
func (a *answer) appendOpenAIUsage(b []byte) []byte {
	total := a.e.usageTokens
	p, c := splitUsage(total)
	if u := a.e.cache; u != nil {
		p, c = u.prompt(), u.Output
		total = p + c
	}
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if u := a.e.cache; u != nil {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(u.CacheRead), 10)
		b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}`...)
	}
	return append(b, '}')
}

// appendOpenAIHead appends the fields every OpenAI completion object and
// chunk starts with, up to and including `"choices":[`.
func (a *answer) appendOpenAIHead(b []byte, idPrefix, object string) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, idPrefix...)
	b = strconv.AppendUint(b, a.id, 10)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, a.now.Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, a.req.Model)
	return append(b, `,"system_fingerprint":"fp_mock","choices":[`...)
}

// chat answers POST …/chat/completions.
func (a *answer) chat() {
	if a.req.Stream {
		a.openAIStream("chatcmpl-mock", "chat.completion.chunk", true)
		return
	}
	b := a.appendOpenAIHead(a.sc.out, "chatcmpl-mock", "chat.completion")
	b = append(b, `{"index":0,"message":{"role":"assistant","content":"`...)
	b = appendText(b, a.e.chunks)
	b = append(b, `","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":`...)
	b = a.appendOpenAIUsage(b)
	a.writeJSON(append(b, '}'))
}

// completion answers POST …/completions (the legacy API).
func (a *answer) completion() {
	if a.req.Stream {
		a.openAIStream("cmpl-mock", "text_completion", false)
		return
	}
	b := a.appendOpenAIHead(a.sc.out, "cmpl-mock", "text_completion")
	b = append(b, `{"text":"`...)
	b = appendText(b, a.e.chunks)
	b = append(b, `","index":0,"logprobs":null,"finish_reason":"stop"}],"usage":`...)
	b = a.appendOpenAIUsage(b)
	a.writeJSON(append(b, '}'))
}

// openAIStream streams a chat (chat=true) or legacy completion: one event
// per content chunk, a finish event, a usage event when
// stream_options.include_usage is set, then [DONE].
func (a *answer) openAIStream(idPrefix, object string, chat bool) {
	s, ok := a.startStream()
	if !ok {
		return
	}
	includeUsage := a.req.StreamOptions.IncludeUsage
	b := append(a.sc.out[:0], "data: "...)
	b = a.appendOpenAIHead(b, idPrefix, object)
	head := len(b)
	tail := func(b []byte) []byte {
		b = append(b, ']')
		if includeUsage {
			b = append(b, `,"usage":null`...)
		}
		return append(b, "}\n\n"...)
	}
	for i := range a.e.chunks {
		b = b[:head]
		if chat {
			b = append(b, `{"index":0,"delta":{`...)
			if i == 0 {
				b = append(b, `"role":"assistant",`...)
			}
			b = append(b, `"content":"`...)
			b = append(b, piece(i)...)
			b = append(b, `"},"logprobs":null,"finish_reason":null}`...)
		} else {
			b = append(b, `{"text":"`...)
			b = append(b, piece(i)...)
			b = append(b, `","index":0,"logprobs":null,"finish_reason":null}`...)
		}
		if !s.chunk(i, tail(b)) {
			return
		}
	}
	b = b[:head]
	if chat {
		b = append(b, `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`...)
	} else {
		b = append(b, `{"text":"","index":0,"logprobs":null,"finish_reason":"stop"}`...)
	}
	if !s.emit(tail(b)) {
		return
	}
	if includeUsage {
		b = append(b[:head], `],"usage":`...)
		b = a.appendOpenAIUsage(b)
		if !s.emit(append(b, "}\n\n"...)) {
			return
		}
	}
	s.emit(append(b[:0], "data: [DONE]\n\n"...))
	a.sc.out = b[:0]
}

// embeddings answers POST …/embeddings with one vector per input, as floats
// or, when encoding_format is "base64" (the official SDKs' default), as
// little-endian float32 bytes in base64.
func (a *answer) embeddings() {
	n := inputCount(a.req.Input)
	dims := a.req.Dimensions
	if dims <= 0 || dims > 4096 {
		dims = 16
	}
	b64 := a.req.EncodingFormat == "base64"
	b := append(a.sc.out, `{"object":"list","data":[`...)
	var raw []byte
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		if b64 {
			raw = raw[:0]
			for j := range dims {
				raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(embeddingValue(i, j)))
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, raw)
			b = append(b, '"')
		} else {
			b = append(b, '[')
			for j := range dims {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendFloat(b, float64(embeddingValue(i, j)), 'f', -1, 32)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = appendJSONString(b, a.req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(a.e.usageTokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(a.e.usageTokens), 10)
	a.writeJSON(append(b, "}}"...))
}

// embeddingValue is a deterministic vector component.
func embeddingValue(i, j int) float32 {
	return float32((i*31+j*17)%100-50) / 100
}

// inputCount counts the inputs of an embeddings request: a string or a
// list of token ids is one input; a list of strings or of token lists is
// one input per element.
func inputCount(raw json.RawMessage) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return 1
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return 1
	}
	if first := bytes.TrimSpace(items[0]); len(first) > 0 && (first[0] == '"' || first[0] == '[') {
		return min(len(items), 2048)
	}
	return 1
}

// models answers GET …/models in the OpenAI or, when the request carries
// anthropic-version, the Anthropic shape.
func (a *answer) models() {
	models := a.srv.opts.Models
	b := a.sc.out
	if a.style == styleAnthropic {
		b = append(b, `{"data":[`...)
		for i, m := range models {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"model","id":`...)
			b = appendJSONString(b, m)
			b = append(b, `,"display_name":`...)
			b = appendJSONString(b, m)
			b = append(b, `,"created_at":"2025-01-01T00:00:00Z"}`...)
		}
		b = append(b, `],"has_more":false,"first_id":`...)
		b = appendJSONString(b, models[0])
		b = append(b, `,"last_id":`...)
		b = appendJSONString(b, models[len(models)-1])
		a.writeJSON(append(b, '}'))
		return
	}
	b = append(b, `{"object":"list","data":[`...)
	for i, m := range models {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, m)
		b = append(b, `,"object":"model","created":1735689600,"owned_by":"upstreamtest"}`...)
	}
	a.writeJSON(append(b, "]}"...))
}
