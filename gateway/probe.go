package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// ProbeResult is what one test request through a connection got.
type ProbeResult struct {
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
func (r ProbeResult) OK() bool { return r.Status >= 200 && r.Status < 300 }

// The reasons Probe sends nothing.
var (
	ErrProbeNotLoaded = errors.New("gateway: no configuration is loaded yet")
	ErrProbeUnknown   = errors.New("gateway: the gateway does not know this connection yet")
	ErrProbeDisabled  = errors.New("gateway: the connection is disabled")
	ErrProbeNoModel   = errors.New("gateway: the connection lists no model that can be routed")
)

// probeMaxTokens bounds the test request's answer: a few tokens say that the
// account, the key and the model work.
const probeMaxTokens = 8

// probeKeyName is the client key name the test requests run under (their
// tokens and spend in the client metrics).
const probeKeyName = "(connection test)"

// probeBodyLimit bounds the answer kept from the upstream.
const probeBodyLimit = 64 << 10

// Probe sends one tiny request (a one-line prompt, probeMaxTokens of answer)
// for the first model of connection id, through the path every request takes
// — admission on the connection's gates, its rate budgets, the attempt and
// the relay — bound to that connection alone (no failover to another), and
// reports the answer. It is not written to the request log. ctx bounds the
// whole request, its wait for admission included.
func (g *Gateway) Probe(ctx context.Context, id string) (ProbeResult, error) {
	s := g.state.Load()
	if s == nil || g.closed.Load() {
		return ProbeResult{}, ErrProbeNotLoaded
	}
	c := s.byID[id]
	switch {
	case c == nil:
		return ProbeResult{}, ErrProbeUnknown
	case !c.enabled:
		return ProbeResult{}, ErrProbeDisabled
	}
	var t *target
	for _, m := range c.models {
		for _, cand := range s.routes[c.style][m] {
			if cand.c == c && cand.model == m {
				t = cand
				break
			}
		}
		if t != nil {
			break
		}
	}
	if t == nil || !c.styleOK {
		return ProbeResult{}, ErrProbeNoModel
	}
	path, body := probeRequest(c.style, t.model)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, path, bytes.NewReader(body))
	if err != nil {
		return ProbeResult{}, err
	}
	r.Header.Set("Content-Type", "application/json")
	w := &probeWriter{header: http.Header{}}
	start := time.Now()
	x := &exchange{g: g, st: wire.OpenAI, start: start}
	defer x.body.Release(g.bodyBytes)
	x.key = clientkey.New(ClientKey{Name: probeKeyName, Enabled: true}, nil, g.metrics.Client(probeKeyName))
	x.keyName, x.priority = probeKeyName, x.key.Priority
	if res, ok := x.probePrepare(w, r, s, t); !ok {
		res.Model, res.Latency = t.model, time.Since(start)
		return res, nil
	}
	x.run()
	return probeAnswer(t.model, w, x, time.Since(start)), nil
}

// probePrepare does what prepare does for a client request, bar the client
// key, with t as the only target; on a refusal it returns the result to report.
func (x *exchange) probePrepare(w http.ResponseWriter, r *http.Request, s *state, t *target) (ProbeResult, bool) {
	rt, aerr := x.checkRoute(w, r)
	if aerr == nil {
		aerr = x.readBody(w, r)
	}
	if aerr == nil {
		aerr = x.route(s, r.URL.Path, rt)
	}
	if aerr != nil {
		return ProbeResult{Status: aerr.Status, Code: aerr.Code, Message: aerr.Message}, false
	}
	x.targets = []*target{t}
	x.w, x.r, x.s, x.rt = w, r, s, rt
	return ProbeResult{}, true
}

// probeRequest is the test request's path and body for a connection of
// style st and upstream model m.
func probeRequest(st wire.Style, m string) (string, []byte) {
	const prompt = "Reply with the single word: ok"
	q, _ := json.Marshal(m)
	n := strconv.Itoa(probeMaxTokens)
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

// probeAnswer reads the answer w holds: the text of a success, the error's
// code and message otherwise.
func probeAnswer(model string, w *probeWriter, x *exchange, took time.Duration) ProbeResult {
	res := ProbeResult{Model: model, Status: w.status, Latency: took}
	if res.Status == 0 {
		res.Status = StatusClientGone
	}
	if x.failed != nil {
		res.Code, res.Message = x.failed.Code, x.failed.Message
		return res
	}
	var a probeBody
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

// probeBody is the parts of an answer, in any of the three API styles, that
// the test shows.
type probeBody struct {
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

func (b *probeBody) text() string {
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
func (b *probeBody) errorCode() string {
	var code string
	if json.Unmarshal(b.Error.Code, &code) == nil && code != "" {
		return code
	}
	if b.Error.Status != "" {
		return b.Error.Status
	}
	return b.Error.Type
}

// probeWriter keeps the test request's answer (its first probeBodyLimit bytes).
type probeWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *probeWriter) Header() http.Header { return w.header }

func (w *probeWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *probeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if room := probeBodyLimit - w.body.Len(); room > 0 {
		w.body.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Flush is there for the relay, which flushes streamed answers.
func (w *probeWriter) Flush() {}
