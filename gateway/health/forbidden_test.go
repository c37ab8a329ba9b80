package health

import (
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// TestForbiddenScopes: a 403 cools its route and model only; a second 403
// on the same scope, or on another one after the window, suspends nothing;
// another scope within the window does; Reset clears it all.
func TestForbiddenScopes(t *testing.T) {
	t.Parallel()
	h := NewConn(BreakerConfig{})
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const cool, window = 30 * time.Second, 10 * time.Minute
	if h.Forbidden("/embeddings", "emb", now, cool, window) {
		t.Fatal("one 403 asked for a suspension")
	}
	if why, until := h.Check("/embeddings", "emb", now); why != Forbidden || !until.Equal(now.Add(cool)) {
		t.Errorf("Check(embeddings, emb) = %v until %v, want Forbidden for 30 s", why, until)
	}
	for _, s := range [][2]string{{"/chat/completions", "emb"}, {"/embeddings", "other"}} {
		if why, _ := h.Check(s[0], s[1], now); why != Available {
			t.Errorf("Check(%s, %s) = %v, want Available", s[0], s[1], why)
		}
	}
	if state, _, reason := h.Status(now); state != live.HealthCooling || reason != "upstream 403 for emb on /embeddings" {
		t.Errorf("Status = %s %q, want cooling with the 403's scope", state, reason)
	}
	if why, _ := h.Check("/embeddings", "emb", now.Add(cool)); why != Available {
		t.Errorf("after the cooldown Check = %v, want Available", why)
	}
	if h.Forbidden("/embeddings", "emb", now.Add(cool), cool, window) {
		t.Error("a second 403 on the same scope asked for a suspension")
	}
	later := now.Add(cool + window)
	if h.Forbidden("/chat/completions", "gpt", later, cool, window) {
		t.Error("a 403 on another scope after the window asked for a suspension")
	}
	if !h.Forbidden("/embeddings", "emb", later.Add(time.Second), cool, window) {
		t.Error("403s on two scopes within the window did not ask for a suspension")
	}
	if h.Forbidden("/x", "y", later.Add(2*time.Second), cool, 0) {
		t.Error("with suspendMs 0 a 403 asked for a suspension")
	}
	h.Reset()
	if why, _ := h.Check("/embeddings", "emb", later.Add(time.Second)); why != Available {
		t.Errorf("after Reset Check = %v, want Available", why)
	}
}
