package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/upstreamtest"
)

// agentModel is the model of the affinity tests' Anthropic connections.
const agentModel = "claude-agent"

// anthropicConn is an Anthropic-style connection to the fake upstream
// under its own API key (one account each).
func (e *env) anthropicConn(id string, maxConc int, affinity bool) Connection {
	c := e.conn(id, "acct-"+id, agentModel)
	c.APIStyle, c.Provider = "anthropic", "anthropic"
	c.Overrides = limits.Overrides{MaxConcurrent: ptr(maxConc), MaxWaitMs: ptr(60000)}
	if !affinity {
		c.Overrides.Affinity = ptr(false)
	}
	return c
}

// agentTools is a tool list shared by every agent (about 2 KB).
var agentTools = func() json.RawMessage {
	var tools []map[string]any
	for i := range 12 {
		tools = append(tools, map[string]any{"name": fmt.Sprintf("tool_%d", i),
			"description":  strings.Repeat("does a thing with files and shells ", 4),
			"input_schema": map[string]any{"type": "object"}})
	}
	b, _ := json.Marshal(tools)
	return b
}()

// agentBody is turn n (from 1) of a conversation whose system prompt is
// system: every earlier turn's user message and a reply, then the new one.
func agentBody(system string, n int) string {
	var msgs []map[string]string
	for k := 1; k <= n; k++ {
		msgs = append(msgs, map[string]string{"role": "user",
			"content": fmt.Sprintf("turn %d: %s", k, strings.Repeat("please look at this file and fix it ", 10))})
		if k < n {
			msgs = append(msgs, map[string]string{"role": "assistant", "content": fmt.Sprintf("done with turn %d", k)})
		}
	}
	b, _ := json.Marshal(map[string]any{"model": agentModel, "max_tokens": 64, "system": system,
		"tools": agentTools, "messages": msgs})
	return string(b)
}

// agentSystem is session i's system prompt (about 1.5 KB).
func agentSystem(i int) string {
	return fmt.Sprintf("You are coding agent %d. ", i) + strings.Repeat("Follow the repository's rules. ", 48)
}

// runAgents runs sessions agent sessions of turns turns each, parallel at a
// time, against e's gateway; the even sessions send X-Claude-Code-Session-Id,
// the odd ones no session id at all. Every request must succeed.
func runAgents(t *testing.T, e *env, sessions, turns, parallel int) {
	t.Helper()
	ctx := testCtx(t)
	work := make(chan int, sessions)
	for i := range sessions {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	errs := make(chan string, sessions*turns)
	for range parallel {
		wg.Go(func() {
			for i := range work {
				var hdr []string
				if i%2 == 0 {
					hdr = []string{session.HeaderClaudeCode, fmt.Sprintf("0b3c%04d-claude-session", i)}
				}
				for n := 1; n <= turns; n++ {
					if r := e.post(ctx, "/v1/messages", agentBody(agentSystem(i), n), hdr...); r.status != http.StatusOK {
						errs <- fmt.Sprintf("session %d turn %d: %d %s", i, n, r.status, r.body)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// cacheShare is the share of prompt tokens the fake upstream's accounts
// read from their caches.
func cacheShare(up *upstreamtest.Server) float64 {
	var prompt, read int64
	for _, c := range up.PromptCache() {
		prompt += c.PromptTokens
		read += c.CacheReadTokens
	}
	if prompt == 0 {
		return 0
	}
	return float64(read) / float64(prompt)
}

// TestAffinityKeepsPromptCache: 16 agent sessions of 8 turns, 8 at a time,
// half with a Claude Code session id and half with none, over 4 accounts of
// cap 3 keep at least 0.9 of the cache share a single account gets, never
// exceed a cap, and each account serves at least 15 % of the requests. With
// affinity off (every connection affinity: false) the share is what
// rotation gives: about a quarter of it.
func TestAffinityKeepsPromptCache(t *testing.T) {
	t.Parallel()
	const sessions, turns, parallel = 16, 8, 8
	upOpts := upstreamtest.Options{PromptCacheTTL: 5 * time.Minute, Latency: 5 * time.Millisecond}

	single := newEnv(t, upOpts)
	single.gw.Apply(Config{Connections: []Connection{single.anthropicConn("solo", 12, true)}})
	runAgents(t, single, sessions, turns, parallel)
	singleShare := cacheShare(single.up)

	run := func(affinity bool) (float64, *env) {
		e := newEnv(t, upOpts)
		var conns []Connection
		for i := range 4 {
			conns = append(conns, e.anthropicConn(fmt.Sprintf("a%d", i), 3, affinity))
		}
		e.gw.Apply(Config{Connections: conns})
		runAgents(t, e, sessions, turns, parallel)
		return cacheShare(e.up), e
	}
	onShare, on := run(true)
	offShare, _ := run(false)
	t.Logf("prompt tokens read from cache: single account %.3f, 4 accounts with affinity %.3f (%.2f × single), without %.3f (%.2f × single)",
		singleShare, onShare, onShare/singleShare, offShare, offShare/singleShare)
	if singleShare < 0.5 {
		t.Fatalf("single-account share %.3f: the workload does not exercise the cache", singleShare)
	}
	if onShare < 0.9*singleShare {
		t.Errorf("with affinity the cache share is %.3f, want ≥ 0.9 × %.3f", onShare, singleShare)
	}
	if offShare >= onShare {
		t.Errorf("without affinity the cache share is %.3f, not below %.3f with it", offShare, onShare)
	}
	st := on.up.Stats()
	total := st.Total.Requests
	if total != sessions*turns {
		t.Errorf("upstream saw %d requests, want %d", total, sessions*turns)
	}
	for i := range 4 {
		key := fmt.Sprintf("acct-a%d", i)
		if p := on.up.Peak(key, agentModel); p > 3 {
			t.Errorf("account %s peaked at %d in flight, above its cap 3", key, p)
		}
		if n := st.ByKey[key].Requests; float64(n) < 0.15*float64(total) {
			t.Errorf("account %s served %d of %d requests, under 15 %%", key, n, total)
		}
	}
}

// served sends turn n of system's conversation with hdr and returns the
// connection that answered it.
func (e *env) served(ctx context.Context, system string, n int, hdr ...string) string {
	e.t.Helper()
	r := e.post(ctx, "/v1/messages", agentBody(system, n), hdr...)
	if r.status != http.StatusOK {
		e.t.Fatalf("turn %d: %d %s", n, r.status, r.body)
	}
	return r.header.Get(HeaderConnection)
}

// TestAffinitySubagents: six subagents of one session (one session id, six
// system prompts) started at once spread over at least 3 of 4 accounts, and
// each keeps its own account from turn to turn.
func TestAffinitySubagents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{Latency: 5 * time.Millisecond})
	var conns []Connection
	for i := range 4 {
		conns = append(conns, e.anthropicConn(fmt.Sprintf("a%d", i), 3, true))
	}
	e.gw.Apply(Config{Connections: conns})
	ctx := testCtx(t)
	hdr := []string{session.HeaderClaudeCode, "one-session"}
	const subagents, turns = 6, 4
	got := make([][]string, subagents)
	var wg sync.WaitGroup
	for i := range subagents {
		wg.Go(func() {
			for n := 1; n <= turns; n++ {
				got[i] = append(got[i], e.served(ctx, agentSystem(100+i), n, hdr...))
			}
		})
	}
	wg.Wait()
	first := map[string]bool{}
	for i, seq := range got {
		first[seq[0]] = true
		for n, c := range seq {
			if c != seq[0] {
				t.Errorf("subagent %d: turn %d on %s, turn 1 on %s", i, n+1, c, seq[0])
			}
		}
	}
	if len(first) < 3 {
		t.Errorf("6 subagents spread over %d accounts (%v), want ≥ 3", len(first), first)
	}
}

// TestAffinitySpillAndMove: a session whose bound connection stays full past
// affinityMaxWaitMs is served by another and stays there; a session whose
// bound connection is disabled or suspended moves without a failed request;
// a connection with affinity false takes no binding.
func TestAffinitySpillAndMove(t *testing.T) {
	t.Parallel()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	settings := limits.Settings{AffinityMaxWaitMs: ptr(100)}
	x, y := e.anthropicConn("x", 1, true), e.anthropicConn("y", 1, true)
	e.gw.Apply(Config{Settings: settings, Connections: []Connection{x, y}})
	ctx := testCtx(t)
	sess := func(name string) []string { return []string{session.HeaderGatehouse, name} }

	// Rotation alternates: a and c land together, b on the other.
	var bound map[string]string
	firsts := 0
	for range 3 {
		firsts += 3
		bound = map[string]string{}
		for _, s := range []string{"a", "b", "c"} {
			bound[s] = e.served(ctx, "sys-"+s, 1, sess(s)...)
		}
		if bound["a"] == bound["c"] {
			break
		}
	}
	if bound["a"] != bound["c"] || bound["a"] == bound["b"] {
		t.Fatalf("first turns landed on %v; want a and c together, b apart", bound)
	}
	full, other := bound["a"], bound["b"]
	waitFor(t, 5*time.Second, "the first turns' records", func() bool { return len(log.all()) == firsts })

	// c's turn 2 holds its bound connection's one slot.
	hold := make(chan struct{})
	if err := e.up.SetKeyBehavior("acct-"+strings.TrimPrefix(full, "conn-"), upstreamtest.Behavior{Hold: hold}); err != nil {
		t.Fatal(err)
	}
	cDone := make(chan string, 1)
	go func() { cDone <- e.served(ctx, "sys-c", 2, sess("c")...) }()
	waitFor(t, 5*time.Second, "c's turn 2 upstream", func() bool { return e.up.InFlight() == 1 })

	// a's turn 2 finds its connection full for affinityMaxWaitMs: spilled.
	if got := e.served(ctx, "sys-a", 2, sess("a")...); got != other {
		t.Errorf("a's turn 2 (bound connection full) served by %s, want %s", got, other)
	}
	close(hold)
	if got := <-cDone; got != full {
		t.Errorf("c's turn 2 served by %s, want its bound %s", got, full)
	}
	// a stays where it spilled.
	if got := e.served(ctx, "sys-a", 3, sess("a")...); got != other {
		t.Errorf("a's turn 3 served by %s, want %s where it spilled to", got, other)
	}

	// Disable c's connection: c moves, answered 200.
	id := strings.TrimPrefix(full, "conn-")
	cfg := Config{Settings: settings, Connections: []Connection{x, y}}
	for i := range cfg.Connections {
		if cfg.Connections[i].ID == id {
			cfg.Connections[i].Enabled = false
		}
	}
	e.gw.Apply(cfg)
	if got := e.served(ctx, "sys-c", 3, sess("c")...); got != other {
		t.Errorf("c's turn 3 (bound connection disabled) served by %s, want %s", got, other)
	}
	// Back on, with b's connection suspended: b moves, and its connection
	// sees no request.
	e.gw.Apply(Config{Settings: settings, Connections: []Connection{x, y}})
	otherID := strings.TrimPrefix(other, "conn-")
	before := e.up.Stats().ByKey["acct-"+otherID].Requests
	e.gw.healthMu.Lock()
	e.gw.health[otherID].Suspend(e.gw.now(), time.Hour, "test")
	e.gw.healthMu.Unlock()
	if got := e.served(ctx, "sys-b", 2, sess("b")...); got != full {
		t.Errorf("b's turn 2 (bound connection suspended) served by %s, want %s", got, full)
	}
	if after := e.up.Stats().ByKey["acct-"+otherID].Requests; after != before {
		t.Errorf("the suspended connection got %d requests", after-before)
	}

	waitFor(t, 5*time.Second, "every record", func() bool { return len(log.all()) == firsts+5 })
	results := map[string]int{}
	for _, r := range log.all()[firsts:] {
		results[r.Affinity]++
	}
	// hit: c turn 2, a turn 3; spilled: a turn 2, c turn 3, b turn 2.
	if diff := cmp.Diff(map[string]int{"hit": 2, "spilled": 3}, results); diff != "" {
		t.Errorf("affinity results after the first turns mismatch (-want +got):\n%s", diff)
	}
}

// TestAffinityOff: connections with affinity false take no bindings: the
// request log says none, and rotation places every turn.
func TestAffinityOff(t *testing.T) {
	t.Parallel()
	log := &recordedLog{}
	e := newEnv(t, upstreamtest.Options{}, func(o *Options) { o.RequestLog = log })
	e.gw.Apply(Config{Connections: []Connection{e.anthropicConn("x", 4, false), e.anthropicConn("y", 4, false)}})
	ctx := testCtx(t)
	seen := map[string]bool{}
	for n := 1; n <= 4; n++ {
		seen[e.served(ctx, "sys", n, session.HeaderGatehouse, "s")] = true
	}
	if len(seen) != 2 {
		t.Errorf("4 turns without affinity served by %v, want both connections in rotation", seen)
	}
	waitFor(t, 5*time.Second, "every record", func() bool { return len(log.all()) == 4 })
	for _, r := range log.all() {
		if r.Affinity != "" {
			t.Errorf("affinity off: record says %q", r.Affinity)
		}
	}
}

// TestSessionsStartingTogetherSpread: a new session whose first turn starts
// while another new session's first turn is still upstream (its binding not
// written yet) goes to the other account, not to the same one because the
// bound counts tie: sessions being bound count as bound. Run twice, with
// the rotation that breaks ties shifted by one between the two, so that
// rotation alone would put them together in one of the two.
func TestSessionsStartingTogetherSpread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, upstreamtest.Options{})
	z := e.conn("z", "acct-z", "other-model")
	e.gw.Apply(Config{Connections: []Connection{e.anthropicConn("x", 4, true), e.anthropicConn("y", 4, true), z}})
	ctx := testCtx(t)
	for round := range 2 {
		hold := make(chan struct{})
		for _, k := range []string{"acct-x", "acct-y"} {
			if err := e.up.SetKeyBehavior(k, upstreamtest.Behavior{Hold: hold}); err != nil {
				t.Fatal(err)
			}
		}
		start := func(name string) <-chan string {
			ch := make(chan string, 1)
			go func() {
				ch <- e.served(ctx, "sys-"+name, 1, session.HeaderGatehouse, name)
			}()
			return ch
		}
		a := start(fmt.Sprintf("a%d", round))
		waitFor(t, 5*time.Second, "the first session upstream", func() bool { return e.up.InFlight() == 1 })
		if round == 1 {
			// A request elsewhere moves the rotation on by one.
			if r := e.post(ctx, "/v1/chat/completions", `{"model":"other-model","messages":[{"role":"user","content":"hi"}]}`); r.status != http.StatusOK {
				t.Fatalf("other model: %d %s", r.status, r.body)
			}
		}
		b := start(fmt.Sprintf("b%d", round))
		waitFor(t, 5*time.Second, "the second session upstream", func() bool { return e.up.InFlight() == 2 })
		close(hold)
		if ca, cb := <-a, <-b; ca == cb {
			t.Errorf("round %d: two sessions started together both went to %s", round, ca)
		}
	}
}
