package upstreamtest

import "strconv"

// appendResponseItem appends the assistant message output item.
func (a *answer) appendResponseItem(b []byte, done bool) []byte {
	b = append(b, `{"type":"message","id":"msg_mock`...)
	b = strconv.AppendUint(b, a.id, 10)
	if !done {
		return append(b, `","status":"in_progress","role":"assistant","content":[]}`...)
	}
	b = append(b, `","status":"completed","role":"assistant","content":[`...)
	b = a.appendOutputText(b)
	return append(b, "]}"...)
}

// appendOutputText appends the output_text content part.
func (a *answer) appendOutputText(b []byte) []byte {
	b = append(b, `{"type":"output_text","text":"`...)
	b = appendText(b, a.e.chunks)
	return append(b, `","annotations":[]}`...)
}

// appendResponse appends a Responses API response object; an unfinished
// one (done=false) has no output and no usage yet.
func (a *answer) appendResponse(b []byte, done bool) []byte {
	b = append(b, `{"id":"resp_mock`...)
	b = strconv.AppendUint(b, a.id, 10)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, a.now.Unix(), 10)
	if done {
		b = append(b, `,"status":"completed"`...)
	} else {
		b = append(b, `,"status":"in_progress"`...)
	}
	b = append(b, `,"error":null,"incomplete_details":null,"instructions":null,"model":`...)
	b = appendJSONString(b, a.req.Model)
	b = append(b, `,"output":[`...)
	if done {
		b = a.appendResponseItem(b, true)
	}
	b = append(b, `],"parallel_tool_calls":true,"temperature":1.0,"tool_choice":"auto","tools":[],"top_p":1.0,"text":{"format":{"type":"text"}},"usage":`...)
	if !done {
		return append(b, "null}"...)
	}
	p, c := splitUsage(a.e.usageTokens)
	total, cached := a.e.usageTokens, 0
	if u := a.e.cache; u != nil {
		p, c, cached = u.prompt(), u.Output, u.CacheRead
		total = p + c
	}
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(cached), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	return append(b, "}}"...)
}

// responses answers POST …/responses (OpenAI Responses API).
func (a *answer) responses() {
	if !a.req.Stream {
		a.writeJSON(a.appendResponse(a.sc.out, true))
		return
	}
	s, ok := a.startStream()
	if !ok {
		return
	}
	seq := 0
	// event starts a named event with its type and sequence number.
	event := func(b []byte, name string) []byte {
		b = appendEvent(b[:0], name)
		b = append(b, `{"type":"`...)
		b = append(b, name...)
		b = append(b, `","sequence_number":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
		seq++
		return b
	}
	// part appends the item/output/content indexes of a content event.
	part := func(b []byte) []byte {
		b = append(b, `,"item_id":"msg_mock`...)
		b = strconv.AppendUint(b, a.id, 10)
		return append(b, `","output_index":0,"content_index":0`...)
	}
	const end = "}\n\n"

	b := event(a.sc.out, "response.created")
	b = append(b, `,"response":`...)
	if !s.emit(append(a.appendResponse(b, false), end...)) {
		return
	}
	b = event(b, "response.output_item.added")
	b = append(b, `,"output_index":0,"item":`...)
	if !s.emit(append(a.appendResponseItem(b, false), end...)) {
		return
	}
	b = part(event(b, "response.content_part.added"))
	if !s.emit(append(b, `,"part":{"type":"output_text","text":"","annotations":[]}`+end...)) {
		return
	}
	for i := range a.e.chunks {
		b = part(event(b, "response.output_text.delta"))
		b = append(b, `,"delta":"`...)
		b = append(b, piece(i)...)
		if !s.chunk(i, append(b, `"`+end...)) {
			return
		}
	}
	b = part(event(b, "response.output_text.done"))
	b = append(b, `,"text":"`...)
	b = appendText(b, a.e.chunks)
	if !s.emit(append(b, `"`+end...)) {
		return
	}
	b = part(event(b, "response.content_part.done"))
	b = append(b, `,"part":`...)
	if !s.emit(append(a.appendOutputText(b), end...)) {
		return
	}
	b = event(b, "response.output_item.done")
	b = append(b, `,"output_index":0,"item":`...)
	if !s.emit(append(a.appendResponseItem(b, true), end...)) {
		return
	}
	b = event(b, "response.completed")
	b = append(b, `,"response":`...)
	b = append(a.appendResponse(b, true), end...)
	s.emit(b)
	a.sc.out = b[:0]
}
