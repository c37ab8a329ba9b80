package session

import (
	"context"
	"testing"
	"time"
)

// TestFingerprintIgnoresToolCallIDs: two turns that differ only in their
// tool-call ids (OpenAI's id and tool_call_id, Anthropic's id and
// tool_use_id, the Responses API's call_id) share a fingerprint; a different
// argument or result, or the same bytes moved from one message to the
// other, does not.
func TestFingerprintIgnoresToolCallIDs(t *testing.T) {
	t.Parallel()
	call := func(id, arg string) []byte {
		return []byte(`{"role":"assistant","tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"f","arguments":"` + arg + `"}}]}`)
	}
	result := func(id, out string) []byte {
		return []byte(`{"role":"tool","tool_call_id" : "` + id + `","content":"` + out + `"}`)
	}
	base := Fingerprint(call("call_1", "a"), result("call_1", "x"))
	if got := Fingerprint(call("call_2", "a"), result("call_2", "x")); got != base {
		t.Error("ids alone changed the fingerprint")
	}
	anth := func(id string) uint64 {
		return Fingerprint([]byte(`{"content":[{"type":"tool_use","id":"`+id+`","input":{}}]}`),
			[]byte(`{"content":[{"type":"tool_result","tool_use_id":"`+id+`","content":"ok"}]}`))
	}
	if anth("toolu_1") != anth("toolu_2") {
		t.Error("Anthropic tool-use ids changed the fingerprint")
	}
	resp := func(id string) uint64 {
		return Fingerprint([]byte(`{"type":"function_call","call_id":"`+id+`"}`), []byte(`{"type":"function_call_output","call_id":"`+id+`","output":"1"}`))
	}
	if resp("c1") != resp("c2") {
		t.Error("Responses API call ids changed the fingerprint")
	}
	for name, fp := range map[string]uint64{
		"another argument": Fingerprint(call("call_1", "b"), result("call_1", "x")),
		"another result":   Fingerprint(call("call_1", "a"), result("call_1", "y")),
		"an escaped quote": Fingerprint(call("call_1", `a\"`), result("call_1", "x")),
		"moved bytes":      Fingerprint(nil, append(call("call_1", "a"), result("call_1", "x")...)),
	} {
		if fp == base {
			t.Errorf("%s: same fingerprint", name)
		}
	}
}

// TestGuardLoopWindow: a fingerprint counts within the loop window only: the
// ninth request with one fingerprint is a loop within the window, not when
// the earlier ones have left it.
func TestGuardLoopWindow(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	g := NewGuard(func() time.Time { return now })
	req := &Request{KeyID: "k", Session: "s", Limits: Limits{LoopLimit: 8, LoopWindow: time.Minute}, Print: 7, HasPrint: true, TTL: time.Hour}
	for i := range 8 {
		e, o, _ := g.Enter(context.Background(), req)
		if o != OK {
			t.Fatalf("request %d: %v", i+1, o)
		}
		e.Leave()
		now = now.Add(10 * time.Second)
	}
	// The first two are 80 and 70 s old now: out of the window.
	e, o, _ := g.Enter(context.Background(), req)
	if o != OK {
		t.Fatalf("9th request with two out of the window = %v, want OK", o)
	}
	e.Leave()
	for range 2 {
		if e, o, _ = g.Enter(context.Background(), req); o != OK {
			break
		}
		e.Leave()
	}
	if o != Looping {
		t.Fatalf("9 within the window = %v, want Looping", o)
	}
	if in, _ := g.Get("s", time.Hour); in.State != "looping" {
		t.Errorf("state = %q, want looping", in.State)
	}
}

// TestGuardBudget: reservations and settlements add up: a known cost
// replaces its estimate, an unknown outcome keeps it spent, and a
// reservation that does not fit makes the session over budget.
func TestGuardBudget(t *testing.T) {
	t.Parallel()
	g := NewGuard(nil)
	e, _, _ := g.Enter(context.Background(), &Request{Session: "s", TTL: time.Hour})
	for i := range 2 {
		if !e.Reserve(40, 100) {
			t.Fatalf("reservation %d of 40 within 100 refused", i+1)
		}
	}
	if e.Reserve(40, 100) {
		t.Fatal("a third of 40 within 100 fit")
	}
	e.Settle(40, 10, true) // spent 10
	e.Settle(40, 0, false) // unknown: spent 50
	if in, _ := g.Get("s", time.Hour); in.SpentMicros != 50 || in.State != "over budget" {
		t.Errorf("after settling = %+v, want spent 50, over budget (held)", in)
	}
	if _, ok := g.Resume("s"); !ok {
		t.Fatal("Resume: unknown")
	}
	if !e.Reserve(90, 100) {
		t.Error("after Resume the budget does not start over")
	}
	e.Leave()
}
