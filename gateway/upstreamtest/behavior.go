package upstreamtest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Failure names an injected failure mode. Besides the named constants, any
// HTTP status from 400 to 599 written in decimal ("429", "500", "503", ...)
// makes the server answer with that status and an error body in the
// provider's own shape.
type Failure string

// Failure modes understood by the server.
const (
	// FailInherit (the zero value) takes the failure mode from the next
	// layer down: per-key behaviour, then the default behaviour.
	FailInherit Failure = ""
	// FailNone forces a normal answer, overriding any failure set below it.
	FailNone Failure = "none"
	// FailReset hijacks the connection and closes it with a TCP reset,
	// without writing a response.
	FailReset Failure = "reset"
	// FailHang never answers; the request ends when the client goes away or
	// the server is closed.
	FailHang Failure = "hang"
	// FailStreamCut starts a stream (status, headers and the first half of
	// the chunks) and then resets the connection. For a non-streaming
	// request it behaves like FailReset.
	FailStreamCut Failure = "stream-cut"
)

// status reports the HTTP status of a status-code failure, or 0.
func (f Failure) status() int {
	if len(f) != 3 {
		return 0
	}
	code, err := strconv.Atoi(string(f))
	if err != nil || code < 400 || code > 599 {
		return 0
	}
	return code
}

// Validate reports whether f is a known failure mode.
func (f Failure) Validate() error {
	switch f {
	case FailInherit, FailNone, FailReset, FailHang, FailStreamCut:
		return nil
	}
	if f.status() != 0 {
		return nil
	}
	return fmt.Errorf("upstreamtest: unknown failure mode %q", string(f))
}

// Behavior programs how the server answers. Zero fields inherit from the
// layer below; the layers are, from the top: X-Mock-* request headers, the
// behaviour set for the request's API key (SetKeyBehavior), the default
// behaviour (SetDefault), and Options.
type Behavior struct {
	// Latency delays the answer (and any injected failure except hang).
	Latency time.Duration
	// Chunks is the number of content chunks of a streamed answer.
	Chunks int
	// ChunkInterval spaces the chunks of a streamed answer.
	ChunkInterval time.Duration
	// UsageTokens is the total token count reported in usage.
	UsageTokens int
	// Cache, when non-nil, is the usage reported instead of UsageTokens'
	// split, prompt-cache counts included, in each style's own fields.
	Cache *CacheUsage
	// Fail injects a failure; see Failure.
	Fail Failure
	// RetryAfter sets the Retry-After header (whole seconds, rounded up)
	// of an injected failure.
	RetryAfter time.Duration
	// FailTimes limits Fail to the first FailTimes requests that use this
	// behaviour; later requests answer normally. Zero means every request.
	// Setting the behaviour again restarts the count.
	FailTimes int
	// Header, when non-nil, is added to every answer of this behaviour
	// (normal or injected status failure), e.g. the provider's rate-limit
	// headers; a layer's Header replaces the one below it, it is not merged.
	// The server does not modify it.
	Header http.Header
	// Hold, when non-nil, makes requests wait (after Latency) until the
	// channel is closed, the client goes away or the server is closed.
	// Tests use it to keep a known number of requests in flight.
	Hold <-chan struct{}
	// HoldLast, when non-nil, makes a stream wait before its last content
	// chunk until the channel is closed (or the client goes away, or the
	// server is closed). Tests use it to count what a client received
	// before the upstream sent the end.
	HoldLast <-chan struct{}
	// MaxInFlight, when positive, is the account's concurrency limit: a
	// request that arrives while more than MaxInFlight requests of its API
	// key are in flight (itself included) is answered at once, before any
	// Latency, with 429 and an error body saying "too many concurrent
	// requests" (a Retry-After only when RetryAfter is set). It counts as an
	// injected failure. Setting the behaviour again changes the limit while
	// the server runs.
	MaxInFlight int
}

// Validate reports whether b is usable.
func (b Behavior) Validate() error {
	if err := b.Fail.Validate(); err != nil {
		return err
	}
	if b.Latency < 0 || b.ChunkInterval < 0 || b.RetryAfter < 0 {
		return fmt.Errorf("upstreamtest: negative duration in behaviour")
	}
	if c := b.Cache; c != nil && (c.Input < 0 || c.CacheRead < 0 || c.CacheWrite < 0 || c.Output < 0) {
		return fmt.Errorf("upstreamtest: negative count in cache usage")
	}
	if b.Chunks < 0 || b.UsageTokens < 0 || b.FailTimes < 0 || b.MaxInFlight < 0 {
		return fmt.Errorf("upstreamtest: negative count in behaviour")
	}
	return nil
}

// CacheUsage is an answer's usage with prompt-cache counts: Input tokens
// not cached, CacheRead read from the cache, CacheWrite written to it, and
// Output. Anthropic reports them as input_tokens, cache_read_input_tokens,
// cache_creation_input_tokens (message_start, and the JSON answer) and
// output_tokens; OpenAI as prompt_tokens (the three inputs together) with
// prompt_tokens_details.cached_tokens (chat, completions, the final stream
// chunk) or input_tokens with input_tokens_details.cached_tokens
// (Responses); Gemini as promptTokenCount with cachedContentTokenCount.
type CacheUsage struct {
	Input, CacheRead, CacheWrite, Output int
}

// prompt is every prompt token: what OpenAI and Gemini report as the prompt.
func (c *CacheUsage) prompt() int { return c.Input + c.CacheRead + c.CacheWrite }

// programmed is a Behavior plus how many failures it has injected so far.
type programmed struct {
	b      Behavior
	failed int
}

// overlay applies p's non-zero fields to e and consumes one failure from p
// when p's failure is the one that applies. Callers hold Server.mu.
func (p *programmed) overlay(e *effective) {
	if p == nil {
		return
	}
	b := p.b
	if b.Latency > 0 {
		e.latency = b.Latency
	}
	if b.Chunks > 0 {
		e.chunks = b.Chunks
	}
	if b.ChunkInterval > 0 {
		e.chunkInterval = b.ChunkInterval
	}
	if b.UsageTokens > 0 {
		e.usageTokens = b.UsageTokens
	}
	if b.Cache != nil {
		e.cache = b.Cache
	}
	if b.RetryAfter > 0 {
		e.retryAfter = b.RetryAfter
	}
	if b.Hold != nil {
		e.hold = b.Hold
	}
	if b.HoldLast != nil {
		e.holdLast = b.HoldLast
	}
	if b.Header != nil {
		e.header = b.Header
	}
	if b.MaxInFlight > 0 {
		e.maxInFlight = b.MaxInFlight
	}
	if b.Fail == FailInherit {
		return
	}
	if b.FailTimes > 0 && p.failed >= b.FailTimes {
		e.fail = FailNone
		return
	}
	e.fail = b.Fail
	e.from = p
}

// effective is the behaviour resolved for one request.
type effective struct {
	latency       time.Duration
	chunks        int
	chunkInterval time.Duration
	usageTokens   int
	cache         *CacheUsage
	retryAfter    time.Duration
	fail          Failure
	hold          <-chan struct{}
	holdLast      <-chan struct{}
	header        http.Header
	from          *programmed // the layer whose failure applies, if any
	maxInFlight   int         // the key's concurrency limit; 0 = none
	overLimit     bool        // this request is over it: 429 at once
}

// Request headers that control one request. They take precedence over
// programmed behaviour.
const (
	HeaderLatency       = "X-Mock-Latency-Ms"
	HeaderChunks        = "X-Mock-Chunks"
	HeaderChunkInterval = "X-Mock-Chunk-Interval-Ms"
	HeaderUsageTokens   = "X-Mock-Usage-Tokens"
	HeaderFail          = "X-Mock-Fail"
	HeaderRetryAfter    = "X-Mock-Retry-After"
)

// applyHeaders overlays X-Mock-* headers on e. The header names are already
// canonical, so the map is indexed directly.
func applyHeaders(h http.Header, e *effective) error {
	if v := h[HeaderLatency]; len(v) > 0 {
		n, err := nonNegative(HeaderLatency, v[0])
		if err != nil {
			return err
		}
		e.latency = time.Duration(n) * time.Millisecond
	}
	if v := h[HeaderChunks]; len(v) > 0 {
		n, err := nonNegative(HeaderChunks, v[0])
		if err != nil {
			return err
		}
		e.chunks = n
	}
	if v := h[HeaderChunkInterval]; len(v) > 0 {
		n, err := nonNegative(HeaderChunkInterval, v[0])
		if err != nil {
			return err
		}
		e.chunkInterval = time.Duration(n) * time.Millisecond
	}
	if v := h[HeaderUsageTokens]; len(v) > 0 {
		n, err := nonNegative(HeaderUsageTokens, v[0])
		if err != nil {
			return err
		}
		e.usageTokens = n
	}
	if v := h[HeaderRetryAfter]; len(v) > 0 {
		n, err := nonNegative(HeaderRetryAfter, v[0])
		if err != nil {
			return err
		}
		e.retryAfter = time.Duration(n) * time.Second
	}
	if v := h[HeaderFail]; len(v) > 0 && v[0] != "" {
		f := Failure(v[0])
		if err := f.Validate(); err != nil {
			return err
		}
		e.fail = f
		e.from = nil
	}
	return nil
}

func nonNegative(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("upstreamtest: header %s: want a non-negative integer, got %q", name, v)
	}
	return n, nil
}

// SetDefault programs the behaviour of requests whose API key has no
// behaviour of its own (and the fields a key's behaviour leaves zero).
// It restarts the FailTimes count.
func (s *Server) SetDefault(b Behavior) error {
	if err := b.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.def = &programmed{b: b}
	s.mu.Unlock()
	return nil
}

// SetKeyBehavior programs the behaviour of requests carrying apiKey, e.g.
// Behavior{Fail: "500", FailTimes: 5} to answer five 500s and then succeed.
// It restarts the FailTimes count.
func (s *Server) SetKeyBehavior(apiKey string, b Behavior) error {
	if err := b.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.keyBehavior[apiKey] = &programmed{b: b}
	s.mu.Unlock()
	return nil
}

// ClearBehaviors removes the default and every per-key behaviour.
func (s *Server) ClearBehaviors() {
	s.mu.Lock()
	s.def = nil
	clear(s.keyBehavior)
	s.mu.Unlock()
}
