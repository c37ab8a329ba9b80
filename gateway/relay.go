package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/outbound"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
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
// strips, decides which stream events the client gets). complete reports
// that the upstream's body was read to its end (so the usage the tap found,
// if any, is the answer's).
func (x *exchange) relay(ctx context.Context, c *conn, resp *http.Response, tap *usage.Tap) (complete bool) {
	defer resp.Body.Close()
	h := x.w.Header()
	outbound.CopyResponseHeader(h, resp.Header)
	if tap.Strips() {
		delete(h, "Content-Length") // the body is not relayed as it is
	}
	x.setQueueHeader(c)
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	x.w.WriteHeader(resp.StatusCode)
	var sw sseWriter
	// flush: a Gemini stream without alt=sse is one JSON array written
	// piece by piece, to be passed on as it comes like events are.
	flush := !sse && x.rt == route.StreamGenerate
	if sse || flush {
		sw = sseWriter{w: x.w, rc: http.NewResponseController(x.w)}
		if sw.rc.Flush() != nil {
			return
		}
	}
	bufp := x.g.getCopyBuf()
	defer x.g.copyBuf.Put(bufp)
	buf := *bufp
	// An error answer relayed as it is (400, 404, 422) is the upstream's
	// message of the request log; its first read holds what is kept.
	noteErr := resp.StatusCode >= 400
	for {
		n, rerr := resp.Body.Read(buf)
		x.relayed += int64(n)
		if n > 0 && noteErr {
			noteErr = false
			x.noteUpstreamError(c, buf[:n])
		}
		if n > 0 {
			out := buf[:n]
			if tap != nil {
				out = tap.Feed(out)
			}
			var werr error
			switch {
			case sse:
				werr = sw.write(out)
			case len(out) > 0:
				if _, werr = x.w.Write(out); werr == nil && flush {
					werr = sw.rc.Flush()
				}
			}
			if werr != nil {
				return
			}
			if len(out) > 0 {
				x.firstByte()
			}
		}
		if rerr == nil {
			continue
		}
		if rerr == io.EOF {
			rest := tap.Flushed()
			switch {
			case sse:
				sw.end(rest)
			case len(rest) > 0:
				_, _ = x.w.Write(rest)
			}
			return true
		}
		if x.r.Context().Err() != nil {
			if shuttingDown(x.r.Context()) {
				// The shutdown bound ran out: a stream ends with an error
				// event, any other body is aborted.
				if !sse {
					panic(http.ErrAbortHandler)
				}
				sw.event(wire.AppendSSEError(buf[:0], x.st, errShuttingDown))
			}
			return
		}
		e := &apiError{Status: http.StatusBadGateway, Code: CodeUpstreamStreamErr, Message: "the upstream stream broke off"}
		if errors.Is(context.Cause(ctx), errExecTimeout) {
			e = &apiError{Status: http.StatusGatewayTimeout, Code: CodeExecutionTimeout,
				Message: "the execution bound of " + c.execBound.String() + " was reached"}
		}
		if !sse {
			panic(http.ErrAbortHandler)
		}
		sw.event(wire.AppendSSEError(buf[:0], x.st, e))
		return
	}
}

// sseWriter passes an event stream on to the client, flushing after every
// write. It sends complete events (and keep-alive comments) and holds back
// the start of an event still under way, so that an event of the gateway's
// own (an error) never lands in the middle of an upstream one.
type sseWriter struct {
	w  io.Writer
	rc *http.ResponseController
	// held is the start of an event whose end has not arrived yet: it is
	// sent with the rest of its event.
	held []byte
}

// write sends every complete event of the held bytes followed by b, and
// holds back the rest.
func (s *sseWriter) write(b []byte) error {
	if len(s.held) > 0 {
		s.held = append(s.held, b...)
		b = s.held
	}
	end := usage.SendableEnd(b)
	if end == 0 && len(b) > maxHeldEvent {
		end = len(b) // no event boundary in sight: stop holding back
	}
	if end > 0 {
		if _, err := s.w.Write(b[:end]); err != nil {
			return err
		}
		if err := s.rc.Flush(); err != nil {
			return err
		}
	}
	if len(s.held) > 0 {
		s.held = s.held[:copy(s.held, s.held[end:])]
	} else {
		s.held = append(s.held, b[end:]...)
	}
	return nil
}

// end sends what is held back, then rest, when the upstream stream has
// ended: an event it did not finish passes on as it is.
func (s *sseWriter) end(rest []byte) {
	if len(s.held) > 0 {
		rest = append(s.held, rest...)
	}
	if len(rest) > 0 {
		if _, err := s.w.Write(rest); err == nil {
			_ = s.rc.Flush()
		}
	}
}

// event sends ev, a complete event of the gateway's own, after the complete
// events sent so far; an upstream event held back unfinished is dropped.
func (s *sseWriter) event(ev []byte) {
	if _, err := s.w.Write(ev); err == nil {
		_ = s.rc.Flush()
	}
}

// maxHeldEvent bounds how much of an unfinished SSE event relay holds back;
// past it, bytes are passed on as they come.
const maxHeldEvent = 1 << 20
