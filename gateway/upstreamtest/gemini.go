package upstreamtest

import "strconv"

// The Gemini API (generativelanguage.googleapis.com): the model is in the
// path, the key in x-goog-api-key or ?key=, usage in usageMetadata. A stream
// is server-sent events with ?alt=sse (what the SDKs and Gemini CLI ask
// for), else one JSON array written element by element.

// geminiUsage splits total tokens into prompt, candidates and thoughts
// tokens: the completion share of splitUsage, a third of it as thoughts, so
// that a reader which forgets thoughtsTokenCount miscounts.
func geminiUsage(total int) (prompt, candidates, thoughts int) {
	p, c := splitUsage(total)
	return p, c - c/3, c / 3
}

// appendGeminiUsage appends a usageMetadata object: total split, or the
// behaviour's cache counts (cachedContentTokenCount, part of the prompt; no
// thoughts).
func (a *answer) appendGeminiUsage(b []byte) []byte {
	total := a.e.usageTokens
	p, c, th := geminiUsage(total)
	if u := a.e.cache; u != nil {
		p, c, th = u.prompt(), u.Output, 0
		total = p + c
	}
	b = append(b, `{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"candidatesTokenCount":`...)
	b = strconv.AppendInt(b, int64(c), 10)
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	if u := a.e.cache; u != nil {
		b = append(b, `,"cachedContentTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.CacheRead), 10)
	}
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `}],"thoughtsTokenCount":`...)
	b = strconv.AppendInt(b, int64(th), 10)
	return append(b, '}')
}

// appendGeminiResponse appends a GenerateContentResponse whose one
// candidate holds text; the last (or only) one carries the finish reason
// and usageMetadata.
func (a *answer) appendGeminiResponse(b []byte, text func([]byte) []byte, last bool) []byte {
	b = append(b, `{"candidates":[{"content":{"parts":[{"text":"`...)
	b = text(b)
	b = append(b, `"}],"role":"model"}`...)
	if last {
		b = append(b, `,"finishReason":"STOP"`...)
	}
	b = append(b, `,"index":0}]`...)
	if last {
		b = append(b, `,"usageMetadata":`...)
		b = a.appendGeminiUsage(b)
	}
	b = append(b, `,"modelVersion":`...)
	b = appendJSONString(b, a.req.Model)
	b = append(b, `,"responseId":"mock`...)
	b = strconv.AppendUint(b, a.id, 10)
	return append(b, `"}`...)
}

// generateContent answers POST …/models/{model}:generateContent.
func (a *answer) generateContent() {
	all := func(b []byte) []byte { return appendText(b, a.e.chunks) }
	a.writeJSON(a.appendGeminiResponse(a.sc.out, all, true))
}

// streamGenerateContent answers POST …/models/{model}:streamGenerateContent:
// one response per content chunk, the last with usageMetadata. Events end
// with CRLF CRLF as Google's do.
func (a *answer) streamGenerateContent() {
	s, ok := a.startStreamAs(a.geminiSSE)
	if !ok {
		return
	}
	b := a.sc.out[:0]
	n := max(a.e.chunks, 1)
	for i := range n {
		b = b[:0]
		switch {
		case a.geminiSSE:
			b = append(b, "data: "...)
		case i == 0:
			b = append(b, '[')
		default:
			b = append(b, ",\r\n"...)
		}
		text := func(b []byte) []byte {
			if i < a.e.chunks {
				b = append(b, piece(i)...)
			}
			return b
		}
		b = a.appendGeminiResponse(b, text, i == n-1)
		switch {
		case a.geminiSSE:
			b = append(b, "\r\n\r\n"...)
		case i == n-1:
			b = append(b, ']')
		}
		if !s.chunk(i, b) {
			return
		}
	}
	a.sc.out = b[:0]
}

// geminiCountTokens answers POST …/models/{model}:countTokens: the prompt
// share of the usage an answer would report.
func (a *answer) geminiCountTokens() {
	p, _, _ := geminiUsage(a.e.usageTokens)
	b := append(a.sc.out, `{"totalTokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	a.writeJSON(append(b, "}]}"...))
}

// geminiModels answers GET …/models in Gemini's list shape.
func (a *answer) geminiModels() {
	b := append(a.sc.out, `{"models":[`...)
	for i, m := range a.srv.opts.Models {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, "models/"+m)
		b = append(b, `,"version":"001","displayName":`...)
		b = appendJSONString(b, m)
		b = append(b, `,"inputTokenLimit":1048576,"outputTokenLimit":65536,"supportedGenerationMethods":["generateContent","countTokens"]}`...)
	}
	a.writeJSON(append(b, "]}"...))
}

// geminiStatus is the google.rpc status name Google answers with for an
// HTTP status.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 405:
		return "UNIMPLEMENTED"
	case 409:
		return "ABORTED"
	case 413:
		return "INVALID_ARGUMENT"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// appendGeminiError appends {"error":{"code","message","status"}}.
func appendGeminiError(b []byte, status int, msg string) []byte {
	b = append(b, `{"error":{"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = appendJSONString(b, msg)
	b = append(b, `,"status":"`...)
	b = append(b, geminiStatus(status)...)
	return append(b, `"}}`...)
}
