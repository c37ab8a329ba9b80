// Package probe is the connection test's request and answer (DESIGN.md,
// the dashboard's "Test connection"): a one-line prompt with MaxTokens of
// answer in a connection's API style, the writer its answer is kept in, and
// what the answer says (text, or error code and message) as a Result.
//
// It never sends anything: the gateway's Probe sends the request through
// the path every request takes, bound to the one connection.
package probe

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// Result is what one test request through a connection got.
type Result struct {
	// Model is the upstream model the request asked for: the connection's first.
	Model string
	// Status is the HTTP status the request was answered with.
	Status int
	// Text is the answer's text when the upstream answered 2xx.
	Text string
	// Code and Message are the error's: Gatehouse's own code when the gateway
	// answered itself, else the upstream's code (or type, or status word).
	Code    string
	Message string
	// Latency runs from the start of the request to the end of its answer,
	// admission included.
	Latency time.Duration
}

// OK reports whether the upstream answered the test request with success.
func (r Result) OK() bool { return r.Status >= 200 && r.Status < 300 }

// MaxTokens bounds the test request's answer: a few tokens say that the
// account, the key and the model work.
const MaxTokens = 8

// bodyLimit bounds the answer kept from the upstream.
const bodyLimit = 64 << 10

// Request is the test request's path and body for a connection of style
// st and upstream model m.
func Request(st wire.Style, m string) (string, []byte) {
	const prompt = "Reply with the single word: ok"
	q, _ := json.Marshal(m)
	n := strconv.Itoa(MaxTokens)
	switch st {
	case wire.Anthropic:
		return "/v1/messages", []byte(`{"model":` + string(q) + `,"max_tokens":` + n +
			`,"messages":[{"role":"user","content":"` + prompt + `"}]}`)
	case wire.Gemini:
		return route.GeminiBeta + "/models/" + m + ":generateContent", []byte(`{"contents":[{"role":"user","parts":[{"text":"` +
			prompt + `"}]}],"generationConfig":{"maxOutputTokens":` + n + `}}`)
	default:
		return "/v1/chat/completions", []byte(`{"model":` + string(q) + `,"max_tokens":` + n +
			`,"messages":[{"role":"user","content":"` + prompt + `"}]}`)
	}
}

// Answer reads the answer w holds for model, took long: the text of a
// success, the error's code and message otherwise; failed is the error the
// gateway answered itself, if it did. A request never answered (its client,
// the probe's context, gone first) has wire.StatusClientGone.
func Answer(model string, w *Writer, failed *wire.Error, took time.Duration) Result {
	res := Result{Model: model, Status: w.status, Latency: took}
	if res.Status == 0 {
		res.Status = wire.StatusClientGone
	}
	if failed != nil {
		res.Code, res.Message = failed.Code, failed.Message
		return res
	}
	var a body
	if err := json.Unmarshal(w.body.Bytes(), &a); err != nil && !res.OK() {
		res.Code, res.Message = strconv.Itoa(res.Status), strings.TrimSpace(w.body.String())
		return res
	}
	if res.OK() {
		res.Text = a.text()
		return res
	}
	res.Code, res.Message = a.errorCode(), a.Error.Message
	if res.Code == "" {
		res.Code = strconv.Itoa(res.Status)
	}
	return res
}

// body is the parts of an answer, in any of the three API styles, that
// the test shows.
type body struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
	} `json:"candidates"`
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Status  string          `json:"status"`
	} `json:"error"`
}

func (b *body) text() string {
	var out strings.Builder
	for _, c := range b.Choices {
		out.WriteString(c.Message.Content)
	}
	for _, c := range b.Content {
		out.WriteString(c.Text)
	}
	for _, c := range b.Candidates {
		for _, p := range c.Content.Parts {
			out.WriteString(p.Text)
		}
	}
	return out.String()
}

// errorCode is the error's code (OpenAI's and Gatehouse's string code),
// else its status word (Gemini's), else its type (Anthropic's).
func (b *body) errorCode() string {
	var code string
	if json.Unmarshal(b.Error.Code, &code) == nil && code != "" {
		return code
	}
	if b.Error.Status != "" {
		return b.Error.Status
	}
	return b.Error.Type
}

// Writer is the http.ResponseWriter the test request is answered to: it
// keeps the status and the first bodyLimit bytes of the body.
type Writer struct {
	header http.Header // nil until Header is first called
	status int
	body   bytes.Buffer
}

func (w *Writer) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}

func (w *Writer) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *Writer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if room := bodyLimit - w.body.Len(); room > 0 {
		w.body.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Flush is there for the relay, which flushes streamed answers.
func (w *Writer) Flush() {}
