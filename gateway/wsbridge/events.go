package wsbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// maxErrorBody bounds the part of a non-stream answer (an error) kept for
// its error message.
const maxErrorBody = 64 << 10

// eventWriter is the http.ResponseWriter a turn's request is served into:
// an event stream's events go to the client as text messages, one per
// event's data, as they come; any other answer (an error, the gateway's or
// the upstream's) becomes one error message at the end.
type eventWriter struct {
	s       *socket
	header  http.Header
	status  int
	sse     bool
	gone    bool   // a message could not be sent
	line    []byte // the start of a line still under way
	data    []byte // the data lines of the event under way
	hasData bool
	lastCR  bool   // the latest write ended with CR
	body    []byte // a non-stream answer, up to maxErrorBody
}

func (w *eventWriter) Header() http.Header { return w.header }

func (w *eventWriter) WriteHeader(status int) {
	if w.status != 0 || status < 200 {
		return
	}
	w.status = status
	w.sse = status == http.StatusOK && strings.HasPrefix(w.header.Get("Content-Type"), "text/event-stream")
}

func (w *eventWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.gone {
		return 0, errGone
	}
	if !w.sse {
		if room := maxErrorBody - len(w.body); room > 0 {
			w.body = append(w.body, p[:min(len(p), room)]...)
		}
		return len(p), nil
	}
	// The events of this write go out in one write to the connection.
	w.s.cork.cork()
	w.feed(p)
	if !w.s.cork.uncork() {
		w.gone = true
	}
	if w.gone {
		return 0, errGone
	}
	return len(p), nil
}

// Flush does nothing: every event is sent as it completes.
func (w *eventWriter) Flush() {}

// errGone is a write to a socket whose client has gone.
var errGone = errors.New("wsbridge: the WebSocket client has gone")

// feed parses p, the next bytes of an event stream (field lines ended by
// LF, CRLF or CR; an empty line ends an event), and sends each event's data.
func (w *eventWriter) feed(p []byte) {
	if w.lastCR && len(p) > 0 && p[0] == '\n' {
		p = p[1:] // the LF of a CRLF split between two writes
	}
	w.lastCR = false
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			w.line = append(w.line, p...)
			return
		}
		var line []byte
		if len(w.line) > 0 {
			w.line = append(w.line, p[:i]...)
			line = w.line
		} else {
			line = p[:i]
		}
		// CRLF: skip the LF too, also when it comes with the next write.
		next := i + 1
		if p[i] == '\r' {
			if next == len(p) {
				w.lastCR = true
			} else if p[next] == '\n' {
				next++
			}
		}
		w.field(line)
		w.line = w.line[:0]
		p = p[next:]
	}
}

// field takes one line of the stream.
func (w *eventWriter) field(line []byte) {
	if len(line) == 0 {
		w.dispatch()
		return
	}
	v, ok := bytes.CutPrefix(line, []byte("data"))
	if !ok || (len(v) > 0 && v[0] != ':') {
		return // event, id, retry, comments: the message is the data alone
	}
	if len(v) > 0 {
		v = v[1:]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
	}
	if w.hasData {
		w.data = append(w.data, '\n')
	}
	w.data = append(w.data, v...)
	w.hasData = true
}

// dispatch sends the event under way.
func (w *eventWriter) dispatch() {
	if !w.hasData {
		return
	}
	data := w.data
	w.data, w.hasData = w.data[:0], false
	if bytes.Equal(data, []byte("[DONE]")) {
		return
	}
	if bytes.HasPrefix(data, []byte(`{"error":`)) {
		// The gateway's own error event on a stream that broke off.
		data = streamErrorMessage(data)
		w.s.answered.Store(true)
	} else if lastEvent(data) {
		if bytes.Contains(data, []byte(`"response.completed"`)) {
			w.s.conv.completedEvent(data)
		}
		w.s.answered.Store(true)
	}
	if !w.s.send(data) {
		w.gone = true
	}
}

// lastEvent reports whether data is an event that ends a response
// (response.completed, .failed or .incomplete, or an error).
func lastEvent(data []byte) bool {
	i := bytes.Index(data, []byte(`"type":"`))
	if i < 0 {
		return false
	}
	t := data[i+len(`"type":"`):]
	for _, end := range []string{"response.completed\"", "response.failed\"", "response.incomplete\"", "error\""} {
		if bytes.HasPrefix(t, []byte(end)) {
			return true
		}
	}
	return false
}

// finish ends the turn: the last event of a stream that ended without its
// empty line, or the error message of a non-stream answer. A turn whose
// client went away (nothing written) sends nothing.
func (w *eventWriter) finish() {
	if w.gone || w.status == 0 {
		return
	}
	if w.sse {
		if len(w.line) > 0 {
			w.field(w.line)
		}
		w.dispatch()
		return
	}
	if w.status == http.StatusOK {
		// A whole response object although the turn asked for a stream.
		m := append([]byte(`{"type":"response.completed","response":`), bytes.TrimSpace(w.body)...)
		w.s.send(append(m, '}'))
		return
	}
	w.s.send(errorMessage(parseError(w.status, w.header, w.body)))
}

// parseError reads the error of a non-stream answer: the "error" object of
// an OpenAI-shaped body (the gateway's own, or an upstream's), else one
// made of the body's text.
func parseError(status int, h http.Header, body []byte) *wire.Error {
	var b struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	e := &wire.Error{Status: status, Gate: h.Get(wire.HeaderGate)}
	e.RetryAfter, _ = strconv.Atoi(h.Get("Retry-After"))
	if json.Unmarshal(body, &b) == nil && b.Error.Message != "" {
		e.Message = b.Error.Message
		switch c := b.Error.Code.(type) {
		case string:
			e.Code = c
		case float64:
			e.Code = strconv.FormatFloat(c, 'f', -1, 64)
		}
		return e
	}
	e.Code = gateway.CodeUpstreamError
	e.Message = strings.TrimSpace(string(body))
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// errorMessage is the error message of a refused or failed turn: the
// status, the error (type, code, message) as the HTTP answer had it, and
// its Retry-After seconds both as a number and among the headers (where
// Codex reads it).
func errorMessage(e *wire.Error) []byte {
	type errBody struct {
		Type    string `json:"type"`
		Code    string `json:"code,omitempty"`
		Message string `json:"message"`
	}
	m := struct {
		Type       string            `json:"type"`
		Status     int               `json:"status"`
		Error      errBody           `json:"error"`
		RetryAfter int               `json:"retry_after,omitempty"`
		Headers    map[string]string `json:"headers,omitempty"`
	}{Type: "error", Status: e.Status, Error: errBody{Type: wire.ErrorType(e.Status), Code: e.Code, Message: e.Message},
		RetryAfter: e.RetryAfter}
	if e.RetryAfter > 0 || e.Gate != "" {
		m.Headers = make(map[string]string, 2)
		if e.RetryAfter > 0 {
			m.Headers["retry-after"] = strconv.Itoa(e.RetryAfter)
		}
		if e.Gate != "" {
			m.Headers[strings.ToLower(wire.HeaderGate)] = e.Gate
		}
	}
	out, _ := json.Marshal(m)
	return out
}

// streamErrorMessage turns the gateway's error event on a stream that broke
// off ({"error":{…}}) into an error message.
func streamErrorMessage(data []byte) []byte {
	e := parseError(http.StatusBadGateway, http.Header{}, data)
	switch e.Code {
	case gateway.CodeShuttingDown:
		e.Status, e.RetryAfter = http.StatusServiceUnavailable, 1
	case gateway.CodeExecutionTimeout:
		e.Status = http.StatusGatewayTimeout
	}
	return errorMessage(e)
}
