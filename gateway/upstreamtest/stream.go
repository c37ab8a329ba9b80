package upstreamtest

import (
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Bodies are appended by hand into pooled buffers instead of going through
// encoding/json: the fake is load-tested at tens of thousands of requests per
// second and should cost as little of the machine as possible.

// piece returns content chunk i. The pieces are JSON-safe, so they are
// appended without escaping; eight of them make one sentence.
func piece(i int) string {
	switch i % 8 {
	case 0:
		return "Hello"
	case 1:
		return " from"
	case 2:
		return " the"
	case 3:
		return " fake"
	case 4:
		return " upstream"
	case 5:
		return " of"
	case 6:
		return " Gatehouse"
	}
	return ". "
}

// appendText appends the concatenation of the first n pieces: the same
// text a stream of n chunks delivers.
func appendText(b []byte, n int) []byte {
	for i := range n {
		b = append(b, piece(i)...)
	}
	return b
}

// splitUsage splits total tokens into prompt and completion tokens.
func splitUsage(total int) (prompt, completion int) {
	completion = total / 3
	return total - completion, completion
}

// appendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// writeJSON answers 200 with body b and keeps b's storage for the pool.
func (a *answer) writeJSON(b []byte) {
	a.sc.out = b[:0]
	h := a.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	a.w.WriteHeader(http.StatusOK)
	_, _ = a.w.Write(b)
}

// stream is the state of one server-sent-event answer.
type stream struct {
	a  *answer
	rc *http.ResponseController
	// cutAfter is the index of the last chunk sent before a stream-cut
	// failure resets the connection (-1: right after the headers); -2 when
	// no cut is due.
	cutAfter int
}

// startStream writes the status and SSE headers and flushes them. It
// reports false when the stream must stop (client gone, or cut).
func (a *answer) startStream() (*stream, bool) { return a.startStreamAs(true) }

// startStreamAs is startStream for an event stream (sse) or a JSON body
// written piece by piece (Gemini's streamGenerateContent without alt=sse).
func (a *answer) startStreamAs(sse bool) (*stream, bool) {
	s := &stream{a: a, rc: http.NewResponseController(a.w), cutAfter: -2}
	if a.e.fail == FailStreamCut {
		s.cutAfter = (a.e.chunks+1)/2 - 1
	}
	h := a.w.Header()
	if sse {
		h.Set("Content-Type", "text/event-stream")
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
	if err := s.rc.Flush(); err != nil {
		return s, false
	}
	return s, !s.cut(-1)
}

// emit writes one event and flushes it; false when the client is gone.
func (s *stream) emit(b []byte) bool {
	if _, err := s.a.w.Write(b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// chunk emits content event i after the chunk interval (none before the
// first) and, for the last one, after HoldLast; false when the stream must
// stop.
func (s *stream) chunk(i int, b []byte) bool {
	if i > 0 && s.a.e.chunkInterval > 0 && !s.a.srv.sleep(s.a.ctx, s.a.e.chunkInterval) {
		s.a.srv.abandon(s.a.w)
		return false
	}
	if i == s.a.e.chunks-1 && !s.a.srv.hold(s.a.ctx, s.a.e.holdLast) {
		s.a.srv.abandon(s.a.w)
		return false
	}
	if !s.emit(b) {
		return false
	}
	return !s.cut(i)
}

// cut resets the connection when the stream-cut point i is reached.
func (s *stream) cut(i int) bool {
	if s.cutAfter != i {
		return false
	}
	resetConn(s.a.w)
	return true
}

// appendEvent appends the "event: name\ndata: " prefix of a named event.
func appendEvent(b []byte, name string) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}
