package session_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
)

func TestIDPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers map[string]string
		pck     string
		user    string
		want    string
	}{
		{"none", nil, "", "", ""},
		{"gatehouse header first", map[string]string{"X-Gatehouse-Session": "g", "X-Claude-Code-Session-Id": "c", "session_id": "x"}, "p", "u", "g"},
		{"claude code", map[string]string{"X-Claude-Code-Session-Id": "c", "session_id": "x"}, "p", "u", "c"},
		{"codex session_id", map[string]string{"session_id": "x"}, "p", "u", "x"},
		{"prompt_cache_key", nil, "p", "u", "p"},
		{"metadata.user_id", nil, "", "u", "u"},
		{"long id cut", map[string]string{"X-Gatehouse-Session": strings.Repeat("a", 1000)}, "", "", strings.Repeat("a", session.MaxIDLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			if got := session.ID(h, tt.pck, tt.user); got != tt.want {
				t.Errorf("ID = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHashScopedToKey(t *testing.T) {
	t.Parallel()
	a, b := session.Hash("key-a", "s1"), session.Hash("key-b", "s1")
	if len(a) != session.HashLen || a == b {
		t.Fatalf("Hash(key-a, s1) = %q, Hash(key-b, s1) = %q: want 16 hex digits, different per key", a, b)
	}
	sum := sha256.Sum256([]byte("key-a\x00s1"))
	if want := hex.EncodeToString(sum[:8]); a != want {
		t.Errorf("Hash(key-a, s1) = %q, want %q (SHA-256 of key id, NUL, session id)", a, want)
	}
	if session.Hash("key-a", "") != "" {
		t.Error("Hash of no session id is not empty")
	}
	if strings.Contains(a, "s1") {
		t.Error("hash shows the id")
	}
}

func TestKeyOfSubagentsAndSessions(t *testing.T) {
	t.Parallel()
	main := session.HashPrompt([]byte(`"main system"`), []byte(`[{"name":"bash"}]`), []byte(`{"role":"user","content":"hi"}`))
	sub := session.HashPrompt([]byte(`"subagent system"`), []byte(`[{"name":"bash"}]`), []byte(`{"role":"user","content":"task"}`))
	mainTurn2 := session.HashPrompt([]byte(`"main system"`), []byte(`[{"name":"bash"}]`), []byte(`{"role":"user","content":"hi"}`))
	if main != mainTurn2 {
		t.Fatal("two turns of one conversation hash differently")
	}
	if session.KeyOf("k", "m", "s", main) == session.KeyOf("k", "m", "s", sub) {
		t.Error("a subagent shares its session's affinity key")
	}
	if session.KeyOf("k", "m", "s", main) == session.KeyOf("k2", "m", "s", main) {
		t.Error("two client keys share an affinity key")
	}
	if session.KeyOf("k", "m", "", main) == session.KeyOf("k", "m", "", sub) {
		t.Error("two conversations without a session id share an affinity key")
	}
	// OpenAI chat keeps the system prompt in the first message.
	chatA := session.HashPrompt(nil, nil, []byte(`{"role":"system","content":"A"}`))
	chatB := session.HashPrompt(nil, nil, []byte(`{"role":"system","content":"B"}`))
	if chatA.System == chatB.System {
		t.Error("without a top-level system prompt the first message does not tell subagents apart")
	}
	// A long part is told apart by its length, its head or its tail.
	long := []byte(strings.Repeat("x", 10000))
	for _, other := range [][]byte{
		[]byte(strings.Repeat("x", 10001)),
		append([]byte("y"), long[1:]...),
		append(append([]byte(nil), long[:9999]...), 'y'),
	} {
		if session.HashPrompt(long, nil, nil) == session.HashPrompt(other, nil, nil) {
			t.Errorf("long system prompts that differ in length, head or tail hash alike")
		}
	}
	// Moving bytes between parts changes the hash.
	if session.HashPrompt([]byte("ab"), []byte("c"), nil) == session.HashPrompt([]byte("a"), []byte("bc"), nil) {
		t.Error("parts are not delimited")
	}
}

func TestBindingsTTLAndLRU(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	b := session.NewBindings(5*time.Minute, 2)
	b.Put(1, "c1", now)
	b.Put(2, "c2", now.Add(time.Second))
	if c, ok := b.Get(1, now.Add(2*time.Second)); !ok || c != "c1" {
		t.Fatalf("Get(1) = %q, %v; want c1", c, ok)
	}
	// Refresh 1, so 2 is the least recently used and goes for 3.
	b.Put(1, "c1", now.Add(3*time.Second))
	b.Put(3, "c3", now.Add(4*time.Second))
	if _, ok := b.Get(2, now.Add(5*time.Second)); ok {
		t.Error("the least recently used binding was kept past the bound")
	}
	if c, ok := b.Get(1, now.Add(5*time.Second)); !ok || c != "c1" {
		t.Errorf("Get(1) = %q, %v after the bound dropped another; want c1", c, ok)
	}
	// TTL: 1 was last used at +3 s.
	if _, ok := b.Get(1, now.Add(3*time.Second+5*time.Minute)); ok {
		t.Error("a binding outlived its TTL")
	}
	if c, ok := b.Get(3, now.Add(3*time.Second+5*time.Minute)); !ok || c != "c3" {
		t.Errorf("Get(3) = %q, %v inside its TTL; want c3", c, ok)
	}
	b.Put(3, "c4", now.Add(6*time.Minute))
	if c, _ := b.Get(3, now.Add(6*time.Minute)); c != "c4" {
		t.Errorf("rebinding: Get(3) = %q, want c4", c)
	}
	b.Forget(3)
	if _, ok := b.Get(3, now.Add(6*time.Minute)); ok {
		t.Error("Forget kept the binding")
	}
	b.Configure(time.Minute, 1)
	if b.Len() > 1 {
		t.Errorf("Len = %d after lowering the bound to 1", b.Len())
	}
}

// TestBindingsMemory holds 100 000 bindings (the default maxAffinityBindings)
// within 30 MB of heap.
func TestBindingsMemory(t *testing.T) {
	conns := []string{"10000000-0000-4000-8000-000000000001", "10000000-0000-4000-8000-000000000002"}
	now := time.Unix(1_700_000_000, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := session.NewBindings(5*time.Minute, 100_000)
	for i := range 100_000 {
		b.Put(session.Key(uint64(i)*0x9e3779b97f4a7c15+1), conns[i%2], now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if b.Len() != 100_000 {
		t.Fatalf("Len = %d, want 100000", b.Len())
	}
	used := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("100000 bindings: %.1f MB of heap", float64(used)/1e6)
	if used > 30<<20 {
		t.Errorf("100000 bindings take %d bytes of heap, want ≤ 30 MB", used)
	}
	runtime.KeepAlive(b)
}

func BenchmarkBindingsGetPut(b *testing.B) {
	bs := session.NewBindings(5*time.Minute, 100_000)
	now := time.Unix(1_700_000_000, 0)
	for i := range 10_000 {
		bs.Put(session.Key(i+1), "c", now)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := session.Key(i%10_000 + 1)
		bs.Get(k, now)
		bs.Put(k, "c", now)
	}
}

// TestBindingsChange: Put says whether a binding is new, moved or due to be
// shared again (half its TTL since it last was).
func TestBindingsChange(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	b := session.NewBindings(4*time.Minute, 10)
	steps := []struct {
		conn string
		at   time.Duration
		want session.Change
	}{
		{"c1", 0, session.New},
		{"c1", time.Minute, session.Same},
		{"c2", 90 * time.Second, session.Moved},
		{"c2", 3 * time.Minute, session.Same},
		{"c2", 3*time.Minute + 31*time.Second, session.Stale},
		{"c2", 4 * time.Minute, session.Same},
	}
	for _, s := range steps {
		if got := b.Put(7, s.conn, now.Add(s.at)); got != s.want {
			t.Errorf("Put(%s) at +%v = %v, want %v", s.conn, s.at, got, s.want)
		}
	}
	b.Adopt(8, "c3", now)
	if got := b.Put(8, "c3", now.Add(time.Minute)); got != session.Same {
		t.Errorf("Put after Adopt = %v, want Same (adopted bindings count as shared)", got)
	}
}

// BenchmarkRequestKey is what every request with a session pays for
// affinity besides the binding lookup: the stored hash of its session id and
// the affinity key over a 20 KB prompt's system prompt, tools and first
// message.
func BenchmarkRequestKey(b *testing.B) {
	system := []byte(strings.Repeat("Follow the repository's rules. ", 150))
	tools := []byte(strings.Repeat(`{"name":"tool","description":"does a thing with files"},`, 150))
	first := []byte(`{"role":"user","content":"` + strings.Repeat("fix this file ", 100) + `"}`)
	b.SetBytes(int64(len(system) + len(tools) + len(first)))
	b.ReportAllocs()
	for b.Loop() {
		_ = session.Hash("10000000-0000-4000-8000-000000000001", "0b3c0001-claude-session")
		_ = session.KeyOf("10000000-0000-4000-8000-000000000001", "claude-agent", "0b3c0001-claude-session", session.HashPrompt(system, tools, first))
	}
}

func TestBindingsBound(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	b := session.NewBindings(time.Minute, 10)
	if b.Bound(1, now) {
		t.Error("Bound before any Put")
	}
	b.Put(1, "c", now)
	if !b.Bound(1, now.Add(59*time.Second)) || b.Bound(1, now.Add(time.Minute)) {
		t.Error("Bound does not follow the TTL")
	}
}
