package health

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// newTestLearner is a learner over clk with one adaptive gate of cap c.
func newTestLearner(clk *fakeClock, c int) (*Learner, *LearnedGate) {
	l := NewLearner(clk.Now, slog.New(slog.NewTextHandler(io.Discard, nil)))
	lg := l.Configure(map[string]LearnSpec{"connection:a": {ConnID: "a", Level: "connection", Cap: c}})["connection:a"]
	return l, lg
}

// fullSuccesses records n successful responses that each found the gate full.
func fullSuccesses(clk *fakeClock, lg *LearnedGate, n int) {
	for range n {
		lg.succeeded(clk.Now(), true)
	}
}

func TestCutCapSequence(t *testing.T) {
	t.Parallel()
	var got []int
	for c := 8; ; c = cutCap(c) {
		got = append(got, c)
		if c == 1 {
			break
		}
	}
	if diff := cmp.Diff([]int{8, 5, 3, 2, 1}, got); diff != "" {
		t.Errorf("cut sequence mismatch (-want +got):\n%s", diff)
	}
	if got := cutCap(1); got != 1 {
		t.Errorf("cutCap(1) = %d, want 1 (never below 1)", got)
	}
	if got := cutCap(100); got != 70 {
		t.Errorf("cutCap(100) = %d, want 70", got)
	}
}

// TestLearnerBurstCutsOnce: a burst of rejections within one cut window cuts
// once (8 → 5); the next window cuts again; the cap never goes below 1.
func TestLearnerBurstCutsOnce(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, lg := newTestLearner(clk, 8)
	changes := 0
	for range 8 { // the eight requests that were in flight together
		if _, _, ok := lg.cut(clk.Now()); ok {
			changes++
		}
		clk.Advance(100 * time.Millisecond)
	}
	if changes != 1 || lg.eff.Load() != 5 {
		t.Fatalf("a burst of 8 rejections over 0.8 s: %d changes, effective cap %d; want 1 change to 5", changes, lg.eff.Load())
	}
	clk.Advance(200 * time.Millisecond) // one second after the first cut
	var seq []int64
	for range 5 {
		lg.cut(clk.Now())
		seq = append(seq, lg.eff.Load())
		clk.Advance(time.Second)
	}
	if diff := cmp.Diff([]int64{3, 2, 1, 1, 1}, seq); diff != "" {
		t.Errorf("cuts one window apart (-want +got):\n%s", diff)
	}
}

// TestLearnerCutWindowIsMeanHold: with requests holding the gate for 3 s on
// average, rejections 2 s apart belong to one burst.
func TestLearnerCutWindowIsMeanHold(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, lg := newTestLearner(clk, 8)
	for range 20 {
		lg.enter()
		lg.leave(3 * time.Second)
	}
	lg.cut(clk.Now())
	clk.Advance(2 * time.Second)
	if _, _, ok := lg.cut(clk.Now()); ok {
		t.Errorf("cut 2 s after the last one with a mean hold of 3 s changed the cap")
	}
	clk.Advance(1100 * time.Millisecond)
	if _, to, ok := lg.cut(clk.Now()); !ok || to != 3 {
		t.Errorf("cut 3.1 s after the last one = %d, %v; want 3, true", to, ok)
	}
}

// TestLearnerIncreaseNeedsRun: +1 needs 10 × cap successes that found the gate
// full since the last rejection, and never within the quiet time of the last
// cut; successes that found room do not count, a rejection starts the row over.
func TestLearnerIncreaseNeedsRun(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, lg := newTestLearner(clk, 8)
	lg.cut(clk.Now()) // 5
	clk.Advance(11 * time.Second)

	fullSuccesses(clk, lg, 49)
	if lg.eff.Load() != 5 {
		t.Fatalf("raised after 49 of 50 successes: %d", lg.eff.Load())
	}
	for range 100 {
		lg.succeeded(clk.Now(), false) // found room: does not count
	}
	if lg.eff.Load() != 5 {
		t.Fatalf("raised by successes that found the gate with room: %d", lg.eff.Load())
	}
	fullSuccesses(clk, lg, 1)
	if lg.eff.Load() != 6 {
		t.Fatalf("50 full successes since the last cut at cap 5 gave %d, want 6", lg.eff.Load())
	}
	// The next step needs 60 at cap 6.
	fullSuccesses(clk, lg, 59)
	if lg.eff.Load() != 6 {
		t.Fatalf("raised after 59 of 60: %d", lg.eff.Load())
	}
	lg.cut(clk.Now()) // 6 → 4, and the row ends
	fullSuccesses(clk, lg, 100)
	if lg.eff.Load() != 4 {
		t.Fatalf("raised within 10 s of a cut: %d", lg.eff.Load())
	}
	clk.Advance(9 * time.Second)
	fullSuccesses(clk, lg, 1)
	if lg.eff.Load() != 4 {
		t.Fatalf("raised 9 s after a cut: %d", lg.eff.Load())
	}
	clk.Advance(time.Second)
	fullSuccesses(clk, lg, 1)
	if lg.eff.Load() != 5 {
		t.Fatalf("the first full success 10 s after the cut (row long enough) gave %d, want 5", lg.eff.Load())
	}
}

// TestLearnerBounds: never below 1 nor above the configured cap.
func TestLearnerBounds(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, lg := newTestLearner(clk, 3)
	fullSuccesses(clk, lg, 1000)
	if lg.eff.Load() != 3 {
		t.Fatalf("above the configured cap: %d", lg.eff.Load())
	}
	for range 10 {
		lg.cut(clk.Now())
		clk.Advance(2 * time.Second)
	}
	if lg.eff.Load() != 1 {
		t.Fatalf("after ten cuts: %d, want 1", lg.eff.Load())
	}
	for range 5 {
		clk.Advance(11 * time.Second)
		fullSuccesses(clk, lg, 1000)
	}
	if lg.eff.Load() != 3 {
		t.Fatalf("after long runs of successes: %d, want the configured 3", lg.eff.Load())
	}
}

// TestLearnerCapEditClamps: lowering the configured cap clamps the effective
// one; raising it keeps what was learned, except for a gate never lowered,
// which follows; a gate no longer adaptive is forgotten and starts afresh.
func TestLearnerCapEditClamps(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	l, lg := newTestLearner(clk, 8)
	lg.cut(clk.Now()) // 5
	l.Configure(map[string]LearnSpec{"connection:a": {ConnID: "a", Level: "connection", Cap: 3}})
	if lg.eff.Load() != 3 {
		t.Fatalf("cap edited to 3: effective %d, want 3", lg.eff.Load())
	}
	l.Configure(map[string]LearnSpec{"connection:a": {ConnID: "a", Level: "connection", Cap: 10}, "model:a:m": {ConnID: "a", Level: "model", Cap: 4}})
	if lg.eff.Load() != 3 {
		t.Fatalf("cap raised to 10: effective %d, want the learned 3", lg.eff.Load())
	}
	if diff := cmp.Diff(map[string]int{"connection:a": 3, "model:a:m": 4}, l.Effective()); diff != "" {
		t.Errorf("effective caps mismatch (-want +got):\n%s", diff)
	}
	l.Configure(map[string]LearnSpec{"connection:a": {ConnID: "a", Level: "connection", Cap: 10}, "model:a:m": {ConnID: "a", Level: "model", Cap: 6}})
	if c, _ := l.EffectiveCap("model:a:m"); c != 6 {
		t.Errorf("a model gate never lowered: %d after its cap went 4 → 6, want 6", c)
	}
	l.Configure(map[string]LearnSpec{})
	if _, ok := l.EffectiveCap("connection:a"); ok {
		t.Errorf("a gate no longer adaptive is still learned")
	}
}

// TestLearnerFullAtEntry: a request finds the gate full when with it in-flight
// reaches the effective cap.
func TestLearnerFullAtEntry(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	_, lg := newTestLearner(clk, 2)
	p := LearnPath{lg}
	if full := p.Enter(); full != 0 {
		t.Errorf("first of two: full = %b", full)
	}
	if full := p.Enter(); full != 1 {
		t.Errorf("second of two: full = %b, want 1", full)
	}
	p.Leave(clk.Now())
	p.Leave(clk.Now())
	if lg.inFlight.Load() != 0 {
		t.Errorf("in flight after both left: %d", lg.inFlight.Load())
	}
}

func TestNamesOverload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want bool
	}{
		{name: "openai code", body: `{"error":{"message":"slow down","type":"requests","code":"concurrency_limit_exceeded"}}`, want: true},
		{name: "zai message", body: `{"error":{"code":"1302","message":"High concurrency usage of this API, please reduce concurrency"}}`, want: true},
		{name: "too many concurrent", body: `{"error":{"message":"Too many concurrent requests for this account"}}`, want: true},
		{name: "anthropic overloaded", body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, want: true},
		{name: "top level", body: `{"message":"server overloaded"}`, want: true},
		{name: "error string", body: `{"error":"concurrency exceeded"}`, want: true},
		{name: "numeric code", body: `{"error":{"code":1302,"message":"rate limited"}}`, want: false},
		{name: "plain rate limit", body: `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, want: false},
		{name: "elsewhere in the body", body: `{"error":{"message":"bad request"},"hint":"concurrency"}`, want: false},
		{name: "not json", body: `concurrency`, want: false},
		{name: "empty", body: ``, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := NamesOverload([]byte(tt.body)); got != tt.want {
				t.Errorf("NamesOverload(%s) = %v, want %v", tt.body, got, tt.want)
			}
		})
	}
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
