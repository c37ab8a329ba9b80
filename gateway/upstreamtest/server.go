// Package upstreamtest is a fake OpenAI/Anthropic/Gemini provider for end-to-end
// tests, benchmarks and the demo.
//
// A *Server is an http.Handler. Either serve it yourself (for example with
// httptest.NewServer(srv), in which case call srv.Close before the
// httptest server's Close so hanging requests end), or let it listen with
// Start and stop it with Shutdown or Close.
//
// Routes match by path suffix, so any base URL works ("/v1", "/api/paas/v4"):
//
//	POST …/chat/completions   OpenAI chat completion (stream: SSE chunks)
//	POST …/completions        OpenAI legacy completion
//	POST …/embeddings         OpenAI embeddings (float or base64)
//	POST …/responses          OpenAI Responses API
//	POST …/messages           Anthropic Messages API
//	POST …/messages/count_tokens  Anthropic token counting ({"input_tokens": N})
//	GET  …/models             model list (Anthropic shape with anthropic-version,
//	                          Gemini's with x-goog-api-key or ?key=)
//	POST …/models/{m}:generateContent        Gemini generation
//	POST …/models/{m}:streamGenerateContent  Gemini stream (SSE with ?alt=sse,
//	                          else a JSON array written piece by piece)
//	POST …/models/{m}:countTokens            Gemini token counting
//	GET  /stats               Stats as JSON
//	POST /stats/reset         Reset
//
// Behaviour per request comes from X-Mock-* headers (see HeaderLatency and
// friends), from SetKeyBehavior, from SetDefault and from Options, in that
// order. The server counts concurrency per (API key, model), per key, per
// model and in total; see Stats.
//
// With Options.PromptCacheTTL each account (API key) keeps a prompt cache as a
// provider does: a prefix of system prompt, tools and messages seen on that
// account within the TTL is reported as cache reads, and PromptCache tallies
// what each account read, so tests can measure what session affinity keeps.
package upstreamtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options are the server-wide defaults. Zero fields take the documented
// defaults.
type Options struct {
	// Latency delays every answer. Default 0.
	Latency time.Duration
	// Chunks is the number of content chunks of a stream. Default 8.
	Chunks int
	// ChunkInterval spaces stream chunks. Default 0.
	ChunkInterval time.Duration
	// UsageTokens is the total token count reported in usage. Default 30.
	UsageTokens int
	// Models are listed by GET …/models. Default ["mock-model"].
	Models []string
	// ArrivalsKept is how many arrival times are kept per (key, model).
	// Default 1000.
	ArrivalsKept int
	// MaxBodyBytes limits request bodies. Default 8 MiB.
	MaxBodyBytes int64
	// RecordHeaders keeps the headers and request URI of every API
	// request, for ReceivedHeaders and ReceivedURIs. Default off (it costs
	// a copy per request).
	RecordHeaders bool
	// PromptCacheTTL, when above 0, keeps a prompt cache per API key for
	// Messages requests (see PromptCache): a prefix seen on the key within
	// the TTL is reported as cache reads. Default off.
	PromptCacheTTL time.Duration
}

func (o Options) withDefaults() Options {
	if o.Chunks <= 0 {
		o.Chunks = 8
	}
	if o.UsageTokens <= 0 {
		o.UsageTokens = 30
	}
	if len(o.Models) == 0 {
		o.Models = []string{"mock-model"}
	}
	if o.ArrivalsKept <= 0 {
		o.ArrivalsKept = 1000
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 8 << 20
	}
	o.Latency = max(o.Latency, 0)
	o.ChunkInterval = max(o.ChunkInterval, 0)
	return o
}

// Server is the fake provider. It is safe for concurrent use.
type Server struct {
	opts    Options
	ids     atomic.Uint64
	scratch sync.Pool // *scratch

	closeOnce sync.Once
	closing   chan struct{} // closed by Close: ends every wait

	mu          sync.Mutex
	total       counter
	pairs       map[keyModel]*pairState
	byKey       map[string]*counter
	byModel     map[string]*counter
	lastKey     map[string]string
	def         *programmed
	keyBehavior map[string]*programmed
	headers     []http.Header // with Options.RecordHeaders
	uris        []string      // with Options.RecordHeaders: each request's path and query
	changed     chan struct{} // non-nil while WaitUntil waits
	httpSrv     *http.Server
	url         string
	serveDone   chan struct{}
	serveErr    error
	cache       promptCache // with Options.PromptCacheTTL
}

// NewServer returns a server with opts' defaults filled in.
func NewServer(opts Options) *Server {
	return &Server{
		opts:        opts.withDefaults(),
		closing:     make(chan struct{}),
		pairs:       make(map[keyModel]*pairState),
		byKey:       make(map[string]*counter),
		byModel:     make(map[string]*counter),
		lastKey:     make(map[string]string),
		keyBehavior: make(map[string]*programmed),
	}
}

// ServeHTTP answers the provider routes and the /stats endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/stats":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		s.serveStats(w)
		return
	case "/stats/reset":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	rt, method := routeOf(r.URL.Path)
	st := styleOf(rt, r)
	if rt == routeNone {
		writeError(w, st, http.StatusNotFound, "unknown route "+r.URL.Path)
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, st, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return
	}
	s.serveAPI(w, r, rt, st)
}

// request holds the body fields the fake looks at.
type request struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     int             `json:"dimensions"`
}

// scratch is the per-request buffer set, pooled.
type scratch struct {
	in  bytes.Buffer
	out []byte
}

const maxPooled = 1 << 20

func (s *Server) getScratch() *scratch {
	if sc, ok := s.scratch.Get().(*scratch); ok {
		return sc
	}
	return &scratch{out: make([]byte, 0, 4096)}
}

func (s *Server) putScratch(sc *scratch) {
	if sc.in.Cap() > maxPooled || cap(sc.out) > maxPooled {
		return
	}
	sc.in.Reset()
	sc.out = sc.out[:0]
	s.scratch.Put(sc)
}

// ReceivedHeaders returns the headers of every API request received so far,
// in arrival order, when Options.RecordHeaders is set (else nil). Reset
// forgets them.
func (s *Server) ReceivedHeaders() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]http.Header, len(s.headers))
	for i, h := range s.headers {
		out[i] = h.Clone()
	}
	return out
}

// ReceivedURIs returns the request URI (path and query, as sent) of every
// API request received so far, in arrival order, when Options.RecordHeaders
// is set (else nil). Reset forgets them.
func (s *Server) ReceivedURIs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.uris...)
}

// apiKey takes the key from "Authorization: Bearer", x-api-key,
// x-goog-api-key or, last, Gemini's ?key=.
func apiKey(r *http.Request) string {
	if v := r.Header["Authorization"]; len(v) > 0 {
		if k, ok := strings.CutPrefix(v[0], "Bearer "); ok {
			return strings.TrimSpace(k)
		}
	}
	if v := r.Header["X-Api-Key"]; len(v) > 0 {
		return v[0]
	}
	if v := r.Header["X-Goog-Api-Key"]; len(v) > 0 {
		return v[0]
	}
	if r.URL.RawQuery != "" {
		return r.URL.Query().Get("key")
	}
	return ""
}

// answer is everything a response writer needs.
type answer struct {
	w     http.ResponseWriter
	ctx   context.Context
	req   *request
	e     effective
	id    uint64
	now   time.Time
	sc    *scratch
	style style
	srv   *Server
	// geminiSSE: a Gemini stream asked for server-sent events (?alt=sse).
	geminiSSE bool
	// cache is the prompt's split by the prompt cache (nil without one).
	cache *cacheUsage
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, rt route, st style) {
	now := time.Now()
	if s.opts.RecordHeaders {
		h := r.Header.Clone()
		s.mu.Lock()
		s.headers = append(s.headers, h)
		s.uris = append(s.uris, r.RequestURI)
		s.mu.Unlock()
	}
	key := apiKey(r)
	sc := s.getScratch()
	defer s.putScratch(sc)

	var req request
	var bodyErr error
	if r.Method == http.MethodPost {
		if _, err := sc.in.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)); err != nil {
			bodyErr = fmt.Errorf("read body: %w", err)
		} else if err := json.Unmarshal(sc.in.Bytes(), &req); err != nil {
			bodyErr = fmt.Errorf("decode body: %w", err)
		}
	}

	if st == styleGemini && rt != routeModels {
		// The model is the path's; a Gemini body names none.
		_, req.Model = geminiRoute(r.URL.Path)
		req.Stream = rt == routeStreamGenerate
	}
	t, e, err := s.enter(r, key, req.Model, now)
	defer s.leave(t)
	switch {
	case err != nil:
		writeError(w, st, http.StatusBadRequest, err.Error())
		return
	case bodyErr != nil:
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](bodyErr); ok {
			status = http.StatusRequestEntityTooLarge
		}
		writeError(w, st, status, bodyErr.Error())
		return
	case key == "":
		writeError(w, st, http.StatusUnauthorized, "missing API key")
		return
	}

	ctx := r.Context()
	if e.overLimit {
		writeOverLimit(w, st, e.maxInFlight, e.retryAfter)
		return
	}
	if e.fail == FailHang {
		s.sleep(ctx, -1)
		s.abandon(w)
		return
	}
	if !s.sleep(ctx, e.latency) || !s.hold(ctx, e.hold) {
		s.abandon(w)
		return
	}
	for k, v := range e.header {
		w.Header()[http.CanonicalHeaderKey(k)] = v
	}
	if code := e.fail.status(); code != 0 {
		writeFailure(w, st, code, e.retryAfter)
		return
	}
	if e.fail == FailReset || (e.fail == FailStreamCut && !req.Stream) {
		resetConn(w)
		return
	}

	a := &answer{w: w, ctx: ctx, req: &req, e: e, id: s.ids.Add(1), now: now, sc: sc, style: st, srv: s}
	switch rt {
	case routeChat:
		a.chat()
	case routeCompletions:
		a.completion()
	case routeEmbeddings:
		a.embeddings()
	case routeResponses:
		a.responses()
	case routeMessages:
		if s.opts.PromptCacheTTL > 0 {
			if u, ok := s.lookupCache(key, sc.in.Bytes(), now); ok {
				a.cache = &u
			}
		}
		a.messages()
	case routeCountTokens:
		a.countTokens()
	case routeModels:
		if st == styleGemini {
			a.geminiModels()
		} else {
			a.models()
		}
	case routeGenerate:
		a.generateContent()
	case routeStreamGenerate:
		a.geminiSSE = r.URL.Query().Get("alt") == "sse"
		a.streamGenerateContent()
	case routeGeminiCount:
		a.geminiCountTokens()
	}
}

// sleep waits for d, or forever when d < 0. It reports false when the
// client went away or the server is closing first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d == 0 {
		return ctx.Err() == nil
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
}

// hold waits until ch is closed (nil: no wait). It reports false when the
// client went away or the server is closing first.
func (s *Server) hold(ctx context.Context, ch <-chan struct{}) bool {
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		return false
	}
}

// abandon ends a request whose wait was cut short. When the server is
// closing, the connection is reset so the client never mistakes the end of
// the handler for an (empty) answer; when the client left, there is nobody
// to tell.
func (s *Server) abandon(w http.ResponseWriter) {
	select {
	case <-s.closing:
		resetConn(w)
	default:
	}
}
