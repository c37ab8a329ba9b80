package upstreamtest

import (
	"encoding/json"
	"hash/maphash"
	"time"
)

// The prompt cache (Options.PromptCacheTTL): like a provider's, kept per
// account (API key). A Messages request's prompt is a sequence of blocks —
// the system prompt, the tools, then each message — and every prefix of it
// is cached on the account for the TTL from its latest use. The longest
// prefix the account has seen within its TTL is reported as cache reads
// (Anthropic's cache_read_input_tokens), the rest as a cache write
// (cache_creation_input_tokens), and input_tokens is 0 beyond those, as for
// a request whose whole prompt is marked cacheable. A block counts one
// token per 4 bytes (at least one).

// PromptCacheCounter is one account's prompt-cache tally since the last
// Reset: every prompt token of its Messages requests, and how many of them
// were read from its cache.
type PromptCacheCounter struct {
	PromptTokens    int64 `json:"promptTokens"`
	CacheReadTokens int64 `json:"cacheReadTokens"`
}

// cacheUsage is one answer's prompt tokens as the cache splits them.
type cacheUsage struct {
	read, write int
}

// promptCache is the accounts' cached prefixes: by key, the hash of a
// prefix → when it was last used. Guarded by Server.mu.
type promptCache struct {
	seed     maphash.Seed
	prefixes map[string]map[uint64]time.Time
	counts   map[string]*PromptCacheCounter
}

// messagesPrompt is the part of a Messages body the cache reads.
type messagesPrompt struct {
	System   json.RawMessage   `json:"system"`
	Tools    json.RawMessage   `json:"tools"`
	Messages []json.RawMessage `json:"messages"`
}

func blockTokens(b []byte) int { return max(len(b)/4, 1) }

// lookupCache splits the prompt of body, sent with key at now, into the
// tokens read from the account's cache and those written to it, and caches
// every prefix of it. ok is false when the body is no Messages prompt.
func (s *Server) lookupCache(key string, body []byte, now time.Time) (cacheUsage, bool) {
	var p messagesPrompt
	if json.Unmarshal(body, &p) != nil || len(p.Messages) == 0 {
		return cacheUsage{}, false
	}
	blocks := make([][]byte, 0, 2+len(p.Messages))
	if len(p.System) > 0 {
		blocks = append(blocks, p.System)
	}
	if len(p.Tools) > 0 {
		blocks = append(blocks, p.Tools)
	}
	for _, m := range p.Messages {
		blocks = append(blocks, m)
	}
	ttl := s.opts.PromptCacheTTL
	s.mu.Lock()
	defer s.mu.Unlock()
	pc := &s.cache
	if pc.prefixes == nil {
		pc.seed = maphash.MakeSeed()
		pc.prefixes = make(map[string]map[uint64]time.Time)
		pc.counts = make(map[string]*PromptCacheCounter)
	}
	seen := pc.prefixes[key]
	if seen == nil {
		seen = make(map[uint64]time.Time)
		pc.prefixes[key] = seen
	}
	var h maphash.Hash
	h.SetSeed(pc.seed)
	var u cacheUsage
	hit := true
	for _, b := range blocks {
		_, _ = h.Write(b)
		_, _ = h.Write([]byte{0})
		sum, n := h.Sum64(), blockTokens(b)
		if at, ok := seen[sum]; hit && ok && now.Sub(at) < ttl {
			u.read += n
		} else {
			hit = false
			u.write += n
		}
		seen[sum] = now
	}
	c := pc.counts[key]
	if c == nil {
		c = &PromptCacheCounter{}
		pc.counts[key] = c
	}
	c.PromptTokens += int64(u.read + u.write)
	c.CacheReadTokens += int64(u.read)
	return u, true
}

// PromptCache returns each account's prompt-cache tally (by API key) since
// the last Reset; empty unless Options.PromptCacheTTL is set.
func (s *Server) PromptCache() map[string]PromptCacheCounter {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]PromptCacheCounter, len(s.cache.counts))
	for k, c := range s.cache.counts {
		out[k] = *c
	}
	return out
}
