package health

import (
	"context"
	"maps"
	"testing"
	"time"
)

// TestCapsPushLearned: the configured caps reach admission with every
// adaptive gate's effective cap in place of its configured one, again each
// time the learner cuts; Configured reports the configured cap of the
// adaptive gates only.
func TestCapsPushLearned(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	l, lg := newTestLearner(clk, 8)
	var pushed []map[string]int
	c := &Caps{Learn: l, Push: func(m map[string]int) { pushed = append(pushed, maps.Clone(m)) }}
	l.Changed = c.Repush

	c.Repush()
	if len(pushed) != 0 {
		t.Fatalf("pushed %v before any config was set", pushed)
	}
	conf := map[string]int{"global": 0, "connection:a": 8, "connection:b": 3}
	c.Set(conf)
	if len(pushed) != 1 || !maps.Equal(pushed[0], conf) {
		t.Fatalf("first push %v, want %v", pushed, conf)
	}
	LearnPath{lg}.Rejected(context.Background(), "upstream 429")
	if len(pushed) != 2 || pushed[1]["connection:a"] != 5 || pushed[1]["connection:b"] != 3 {
		t.Fatalf("after a cut: pushes %v, want connection:a at 5 and b unchanged", pushed)
	}
	if conf["connection:a"] != 8 {
		t.Fatal("the push changed the configured caps in place")
	}
	got := c.Configured()
	if !maps.Equal(got, map[string]int{"connection:a": 8}) {
		t.Fatalf("configured caps of the adaptive gates: %v", got)
	}
}

// TestCapsNoAdaptive: without an adaptive gate the configured caps are
// pushed as they are and none is reported as configured apart.
func TestCapsNoAdaptive(t *testing.T) {
	l := NewLearner(time.Now, nil)
	var pushed map[string]int
	c := &Caps{Learn: l, Push: func(m map[string]int) { pushed = m }}
	conf := map[string]int{"connection:x": 2}
	c.Set(conf)
	if !maps.Equal(pushed, conf) {
		t.Fatalf("pushed %v", pushed)
	}
	if got := c.Configured(); got != nil {
		t.Fatalf("configured %v without adaptive gates", got)
	}
}
