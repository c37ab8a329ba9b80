package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
)

// relay sends resp to the client as it arrives, flushing after every write
// for server-sent events. Of an event stream it sends complete events (and
// keep-alive comments) and holds back the start of an event still under way,
// so that the error event it may add never lands inside another event. It
// ends when the body ends, the client goes away or the execution bound
// fires; a stream that breaks after it started gets an SSE error event, any
// other body is aborted so the client sees it cut.
//
// A non-nil tap watches the body for token usage on the way (and, when it
// strips, decides which stream events the client gets).
func (x *exchange) relay(ctx context.Context, c *conn, resp *http.Response, tap *usageTap) {
	defer resp.Body.Close()
	h := x.w.Header()
	copyResponseHeader(h, resp.Header)
	x.setQueueHeader(c)
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	x.w.WriteHeader(resp.StatusCode)
	var rc *http.ResponseController
	if sse {
		rc = http.NewResponseController(x.w)
		if rc.Flush() != nil {
			return
		}
	}
	bufp := x.g.getCopyBuf()
	defer x.g.copyBuf.Put(bufp)
	buf := *bufp
	// held is the start of an SSE event whose end has not arrived yet: it
	// is sent with the rest of its event, so that an error event never
	// lands in the middle of one.
	var held []byte
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			out := buf[:n]
			if tap != nil {
				out = tap.feed(out)
			}
			if sse {
				if len(held) > 0 {
					held = append(held, out...)
					out = held
				}
				end := sendableEnd(out)
				if end == 0 && len(out) > maxHeldEvent {
					end = len(out) // no event boundary in sight: stop holding back
				}
				if end > 0 {
					if _, werr := x.w.Write(out[:end]); werr != nil || rc.Flush() != nil {
						return
					}
				}
				if len(held) > 0 {
					held = held[:copy(held, held[end:])]
				} else {
					held = append(held, out[end:]...)
				}
			} else if len(out) > 0 {
				if _, werr := x.w.Write(out); werr != nil {
					return
				}
			}
		}
		if rerr == nil {
			continue
		}
		if rerr == io.EOF {
			rest := tap.flushed()
			if len(held) > 0 {
				// The upstream ended without finishing its last event:
				// pass its bytes on as they are.
				rest = append(held, rest...)
			}
			if len(rest) > 0 {
				if _, werr := x.w.Write(rest); werr == nil && sse {
					_ = rc.Flush()
				}
			}
			return
		}
		if x.r.Context().Err() != nil {
			return
		}
		e := &apiError{status: http.StatusBadGateway, code: CodeUpstreamStreamErr, message: "the upstream stream broke off"}
		if errors.Is(context.Cause(ctx), errExecTimeout) {
			e = &apiError{status: http.StatusGatewayTimeout, code: CodeExecutionTimeout,
				message: "the execution bound of " + c.execBound.String() + " was reached"}
		}
		if !sse {
			panic(http.ErrAbortHandler)
		}
		ev := appendSSEError(buf[:0], x.st, e)
		if _, err := x.w.Write(ev); err == nil {
			_ = rc.Flush()
		}
		return
	}
}

// maxHeldEvent bounds how much of an unfinished SSE event relay holds back;
// past it, bytes are passed on as they come.
const maxHeldEvent = 1 << 20

// sendableEnd returns how much of b, which starts at an SSE event boundary,
// can be sent now: every complete event, and after them any complete
// comment lines (keep-alives) and blank lines, which change no event state.
// What is left is the start of an event still under way.
func sendableEnd(b []byte) int {
	end := eventsEnd(b)
	for end < len(b) {
		switch b[end] {
		case '\n', '\r':
			end++
			continue
		case ':':
			i := bytes.IndexAny(b[end:], "\r\n")
			if i < 0 {
				return end
			}
			end += i + 1
			continue
		}
		return end
	}
	return end
}

// eventsEnd returns the length of the longest prefix of b that ends with a
// complete SSE event, 0 if none does: the end of a blank line, that is a
// line terminator (CRLF, LF or CR) right after another one. b starts at an
// event boundary.
func eventsEnd(b []byte) int {
	for j := len(b) - 1; j >= 1; j-- {
		switch b[j] {
		case '\n':
			switch {
			case b[j-1] == '\n': // LF LF
				return j + 1
			case b[j-1] == '\r' && j >= 2 && (b[j-2] == '\n' || b[j-2] == '\r'): // (CR)LF CRLF, CR CRLF
				return j + 1
			}
		case '\r':
			if b[j-1] == '\r' || b[j-1] == '\n' { // CR CR, LF CR (a following LF would only complete the CRLF)
				return j + 1
			}
		}
	}
	return 0
}
