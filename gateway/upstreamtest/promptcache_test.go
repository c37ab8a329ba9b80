package upstreamtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPromptCachePerAccount: a prefix seen on an account within the TTL is
// read from its cache; another account, or a later prompt after the TTL,
// writes it anew.
func TestPromptCachePerAccount(t *testing.T) {
	t.Parallel()
	s := NewServer(Options{PromptCacheTTL: time.Hour})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	send := func(key string, msgs ...string) (read, write, input int) {
		t.Helper()
		var m []json.RawMessage
		for _, x := range msgs {
			m = append(m, json.RawMessage(`{"role":"user","content":"`+x+`"}`))
		}
		body, _ := json.Marshal(map[string]any{"model": "m", "system": "0123456789012345", "messages": m, "max_tokens": 5})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/messages", bytes.NewReader(body))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Usage struct {
				Input  int `json:"input_tokens"`
				Read   int `json:"cache_read_input_tokens"`
				Create int `json:"cache_creation_input_tokens"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out.Usage.Read, out.Usage.Create, out.Usage.Input
	}
	// system "0123456789012345" (18 bytes quoted: 4 tokens); each message 32+ bytes.
	r, w, in := send("a", "first message of the conversation")
	if r != 0 || w == 0 || in != 0 {
		t.Fatalf("first turn: read %d write %d input %d, want 0 read, all written", r, w, in)
	}
	first := w
	r, w, _ = send("a", "first message of the conversation", "second message of the conversation")
	if r != first || w == 0 {
		t.Errorf("second turn on the same account: read %d write %d, want read %d (the first turn's prompt)", r, w, first)
	}
	r, _, _ = send("b", "first message of the conversation", "second message of the conversation")
	if r != 0 {
		t.Errorf("another account read %d tokens from a cache it never filled", r)
	}
	pc := s.PromptCache()
	if pc["a"].CacheReadTokens != int64(first) || pc["b"].CacheReadTokens != 0 || pc["a"].PromptTokens <= pc["a"].CacheReadTokens {
		t.Errorf("PromptCache = %+v", pc)
	}
	s.Reset()
	if len(s.PromptCache()) != 0 {
		t.Error("Reset kept the prompt cache's tallies")
	}
}
