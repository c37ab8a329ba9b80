package wsbridge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// What prepare says to do with a message.
type action uint8

const (
	actTurn   action = iota // a response.create: one gateway request
	actIgnore               // an acknowledgement (response.processed): nothing to do
	actRefuse               // a bad message: an error message, the socket stays
	actWarmup               // response.create with generate:false: answered here
)

// conversation is what a socket keeps of its latest turn, so that a
// response.create continuing it by previous_response_id (WebSocket mode
// sends only the new input items then) can be sent upstream as the whole
// request an HTTP Responses call needs.
type conversation struct {
	// input is the latest turn's whole input, a JSON array.
	input json.RawMessage
	// completed is the data of the latest turn's response.completed event
	// (decoded only when a turn refers to it); id, of a warm-up, the
	// response id answered here.
	completed []byte
	id        string
	// model is the latest turn's model, for a warm-up's answer.
	model string
	// inputBuf holds input; members, body and whole are prepare's scratch.
	inputBuf []byte
	members  []member
	body     []byte
	whole    []byte
}

// prepare reads msg and returns the body of the POST /v1/responses it
// stands for: the message's members in their order, without "type" and
// "generate", with "stream": true, and, when previous_response_id names this
// socket's latest response, with the whole input (the latest turn's input,
// its output and the new items) in place of the reference. The members are
// copied byte for byte, never decoded and re-encoded (a Codex turn carries
// the whole conversation).
func (cv *conversation) prepare(msg []byte) ([]byte, action, *wire.Error) {
	ms, err := members(cv.members, msg)
	cv.members = ms
	if err != nil {
		return nil, actRefuse, invalid("the message is not a JSON object")
	}
	var typ, prev, model string
	var input json.RawMessage
	generate := true
	for _, m := range ms {
		v := msg[m.valueStart:m.end]
		switch string(m.key) {
		case "type":
			if json.Unmarshal(v, &typ) != nil {
				return nil, actRefuse, invalid("the message's \"type\" is not a string")
			}
		case "previous_response_id":
			_ = json.Unmarshal(v, &prev)
		case "model":
			_ = json.Unmarshal(v, &model)
		case "input":
			input = v
		case "generate":
			generate = string(v) != "false"
		}
	}
	switch typ {
	case "response.create":
	case "response.processed":
		return nil, actIgnore, nil
	default:
		return nil, actRefuse, invalid("unknown message type " + strconv.Quote(typ) + "; send \"response.create\"")
	}
	var whole json.RawMessage
	if prev != "" {
		whole, _ = cv.continued(prev, input)
	}
	if whole != nil {
		input = whole
	}
	cv.remember(asItems(input), model)
	if !generate {
		return nil, actWarmup, nil
	}
	// The body is only read during the turn (the gateway copies it): one
	// buffer serves every turn of the socket.
	body := append(cv.body[:0], '{')
	for _, m := range ms {
		switch string(m.key) {
		case "type", "generate", "stream":
			continue
		case "previous_response_id", "input":
			if whole != nil {
				continue
			}
		}
		if len(body) > 1 {
			body = append(body, ',')
		}
		body = append(body, msg[m.start:m.end]...)
	}
	if len(body) > 1 {
		body = append(body, ',')
	}
	if whole != nil {
		body = append(body, `"input":`...)
		body = append(body, whole...)
		body = append(body, ',')
	}
	cv.body = append(body, `"stream":true}`...)
	return cv.body, actTurn, nil
}

// remember makes a copy of input (a JSON array) and model the latest
// turn's (the message's buffer is reused); its response is not known yet.
func (cv *conversation) remember(input json.RawMessage, model string) {
	cv.inputBuf = append(cv.inputBuf[:0], input...)
	cv.input, cv.model, cv.completed, cv.id = cv.inputBuf, model, cv.completed[:0], ""
}

// continued returns the whole input of a turn that continues response id
// with the new items: the latest turn's input, its output items, then the
// new ones. false when id is not this socket's latest response.
func (cv *conversation) continued(id string, items json.RawMessage) (json.RawMessage, bool) {
	if cv.input == nil {
		return nil, false
	}
	var output json.RawMessage
	switch {
	case cv.id != "" && cv.id == id:
		output = json.RawMessage("[]")
	case len(cv.completed) > 0:
		var ev struct {
			Response struct {
				ID     string          `json:"id"`
				Output json.RawMessage `json:"output"`
			} `json:"response"`
		}
		if json.Unmarshal(cv.completed, &ev) != nil || ev.Response.ID != id {
			return nil, false
		}
		output = ev.Response.Output
	default:
		return nil, false
	}
	out := append(cv.whole[:0], '[')
	for _, part := range []json.RawMessage{cv.input, output, asItems(items)} {
		inner := arrayInner(part)
		if len(inner) == 0 {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, inner...)
	}
	cv.whole = append(out, ']')
	return cv.whole, true
}

// asItems returns input as a JSON array of items: an array as it is, a
// string as one user message, nothing as an empty array.
func asItems(input json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(input)
	switch {
	case len(t) == 0 || bytes.Equal(t, []byte("null")):
		return json.RawMessage("[]")
	case t[0] == '[':
		return t
	case t[0] == '"':
		b := append([]byte(`[{"type":"message","role":"user","content":`), t...)
		return append(b, "}]"...)
	}
	return json.RawMessage("[]")
}

// arrayInner returns what is between the brackets of a JSON array, trimmed.
func arrayInner(a json.RawMessage) []byte {
	t := bytes.TrimSpace(a)
	if len(t) < 2 || t[0] != '[' {
		return nil
	}
	return bytes.TrimSpace(t[1 : len(t)-1])
}

// trim drops scratch buffers grown past maxKeptBuffer, after a turn: a
// socket keeps only its latest input (and response) between turns.
func (cv *conversation) trim() {
	if cap(cv.body) > maxKeptBuffer {
		cv.body = nil
	}
	if cap(cv.whole) > maxKeptBuffer {
		cv.whole = nil
	}
}

// completedEvent keeps data, the data of a response.completed event of the
// turn running, for a later turn that continues it.
func (cv *conversation) completedEvent(data []byte) {
	cv.completed = append(cv.completed[:0], data...)
}

// warmup answers a response.create with generate:false (WebSocket mode's
// warm-up, which produces no output) with the events of an empty completed
// response; the next turn may continue it by its id.
func (cv *conversation) warmup(n int) [][]byte {
	cv.id = "resp_gatehouse_warmup_" + strconv.Itoa(n)
	resp := func(status string) []byte {
		b := []byte(`{"id":"` + cv.id + `","object":"response","status":"` + status + `","model":`)
		b = appendJSONString(b, cv.model)
		return append(b, `,"output":[],"usage":{"input_tokens":0,"output_tokens":0,"total_tokens":0}}`...)
	}
	created := append([]byte(`{"type":"response.created","response":`), resp("in_progress")...)
	done := append([]byte(`{"type":"response.completed","response":`), resp("completed")...)
	return [][]byte{append(created, '}'), append(done, '}')}
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// invalid is the error message of a message the bridge cannot read.
func invalid(msg string) *wire.Error {
	return &wire.Error{Status: http.StatusBadRequest, Code: gateway.CodeInvalidRequest, Message: msg}
}
