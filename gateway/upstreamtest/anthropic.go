package upstreamtest

import "strconv"

// appendAnthropicMessage appends a message object. A streaming
// message_start carries an empty, unfinished message.
func (a *answer) appendAnthropicMessage(b []byte, started bool) []byte {
	p, c := splitUsage(a.e.usageTokens)
	if u := a.e.cache; u != nil {
		p, c = u.Input, u.Output
	}
	b = append(b, `{"id":"msg_mock`...)
	b = strconv.AppendUint(b, a.id, 10)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendJSONString(b, a.req.Model)
	if started {
		b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
		if a.e.cache != nil { // the behaviour's counts, not the account's cache
			b = strconv.AppendInt(b, int64(p), 10)
			b = a.appendAnthropicCache(b)
		} else {
			b = a.appendPromptUsage(b, p)
		}
		return append(b, `,"output_tokens":1}}`...)
	}
	b = append(b, `,"content":[{"type":"text","text":"`...)
	b = appendText(b, a.e.chunks)
	b = append(b, `"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":`...)
	if a.e.cache != nil { // the behaviour's counts, not the account's cache
		b = strconv.AppendInt(b, int64(p), 10)
		b = a.appendAnthropicCache(b)
	} else {
		b = a.appendPromptUsage(b, p)
	}
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	return append(b, "}}"...)
}

// appendAnthropicCache appends the cache members of a usage object, when
// the behaviour has cache counts.
func (a *answer) appendAnthropicCache(b []byte) []byte {
	u := a.e.cache
	if u == nil {
		return b
	}
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheWrite), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheRead), 10)
	b = append(b, `,"cache_creation":{"ephemeral_5m_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheWrite), 10)
	return append(b, `,"ephemeral_1h_input_tokens":0}`...)
}

// countTokens answers POST …/messages/count_tokens: the prompt share of
// the usage a message would report.
func (a *answer) countTokens() {
	p, _ := splitUsage(a.e.usageTokens)
	b := append(a.sc.out, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	a.writeJSON(append(b, '}'))
}

// messages answers POST …/messages (Anthropic Messages API).
func (a *answer) messages() {
	if !a.req.Stream {
		a.writeJSON(a.appendAnthropicMessage(a.sc.out, false))
		return
	}
	s, ok := a.startStream()
	if !ok {
		return
	}
	b := appendEvent(a.sc.out[:0], "message_start")
	b = append(b, `{"type":"message_start","message":`...)
	b = a.appendAnthropicMessage(b, true)
	if !s.emit(append(b, "}\n\n"...)) {
		return
	}
	b = appendEvent(b[:0], "content_block_start")
	b = append(b, `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n"...)
	if !s.emit(b) {
		return
	}
	b = appendEvent(b[:0], "ping")
	if !s.emit(append(b, `{"type":"ping"}`+"\n\n"...)) {
		return
	}
	for i := range a.e.chunks {
		b = appendEvent(b[:0], "content_block_delta")
		b = append(b, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`...)
		b = append(b, piece(i)...)
		if !s.chunk(i, append(b, `"}}`+"\n\n"...)) {
			return
		}
	}
	b = appendEvent(b[:0], "content_block_stop")
	if !s.emit(append(b, `{"type":"content_block_stop","index":0}`+"\n\n"...)) {
		return
	}
	_, c := splitUsage(a.e.usageTokens)
	if u := a.e.cache; u != nil {
		c = u.Output
	}
	b = appendEvent(b[:0], "message_delta")
	b = append(b, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	if !s.emit(append(b, "}}\n\n"...)) {
		return
	}
	b = appendEvent(b[:0], "message_stop")
	s.emit(append(b, `{"type":"message_stop"}`+"\n\n"...))
	a.sc.out = b[:0]
}

// appendPromptUsage appends the input_tokens value p, or, with a prompt
// cache, 0 and the cache's reads and writes.
func (a *answer) appendPromptUsage(b []byte, p int) []byte {
	if a.cache == nil {
		return strconv.AppendInt(b, int64(p), 10)
	}
	b = append(b, `0,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(a.cache.write), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	return strconv.AppendInt(b, int64(a.cache.read), 10)
}
