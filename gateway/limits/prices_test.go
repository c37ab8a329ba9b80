package limits

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseUSD(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Micros
		ok   bool
	}{
		{"2", 2_000_000, true},
		{"8.0", 8_000_000, true},
		{"0.000001", 1, true},
		{"1e-6", 1, true},
		{"2.5E2", 250_000_000, true},
		{"10000", 10_000_000_000, true},
		{"0", 0, true},
		{"0.0000001", 0, false}, // 7 decimals
		{"1.2345678", 0, false},
		{"01", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"abc", 0, false},
		{"", 0, false},
		{"1e999999999", 0, false},
		{"-1", -1_000_000, true}, // parsed; the range rule refuses it
	} {
		got, ok := ParseUSD(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestMicrosString(t *testing.T) {
	t.Parallel()
	for m, want := range map[Micros]string{0: "0", 1: "0.000001", 2_500_000: "2.5", 6000: "0.006", -1_500_000: "-1.5"} {
		if got := m.String(); got != want {
			t.Errorf("Micros(%d).String() = %q, want %q", m, got, want)
		}
	}
}

func FuzzParseUSD(f *testing.F) {
	for _, s := range []string{"2", "0.000001", "1e-6", "10000", "1.2345678", "-3.25", "9e11"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := ParseUSD(s)
		if !ok {
			return
		}
		back, ok := ParseUSD(m.String())
		if !ok || back != m {
			t.Fatalf("ParseUSD(%q) = %d, but its String %q reads back as %d, %v", s, m, m.String(), back, ok)
		}
	})
}

func TestPricesLookupMostSpecificWins(t *testing.T) {
	t.Parallel()
	p := Prices{
		"zai/glm-5": {Input: new(Micros(1))},
		"glm-5":     {Input: new(Micros(2))},
		"zai/*":     {Input: new(Micros(3))},
		"gpt-4o":    {Output: new(Micros(4))},
	}
	for _, tc := range []struct {
		provider, model string
		want            Rate
	}{
		{"zai", "glm-5", Rate{Input: 1, CachedInput: 1, CacheWrite: 1, Found: true, writeDefault: true}},
		{"other", "glm-5", Rate{Input: 2, CachedInput: 2, CacheWrite: 2, Found: true, writeDefault: true}},
		{"zai", "glm-4.7", Rate{Input: 3, CachedInput: 3, CacheWrite: 3, Found: true, writeDefault: true}},
		{"openai", "gpt-4o", Rate{Output: 4, Found: true, writeDefault: true}},
		{"openai", "gpt-5", Rate{}},
	} {
		if diff := cmp.Diff(tc.want, p.Lookup(tc.provider, tc.model), cmp.AllowUnexported(Rate{})); diff != "" {
			t.Errorf("Lookup(%s, %s) mismatch (-want +got):\n%s", tc.provider, tc.model, diff)
		}
	}
}

func TestRateCost(t *testing.T) {
	t.Parallel()
	r := Rate{Input: 2_000_000, Output: 8_000_000, CachedInput: 500_000, Found: true}
	for _, tc := range []struct {
		in, read, write, out int64
		want                 Micros
	}{
		{1000, 0, 0, 500, 6000}, // DESIGN's example: $2/$8 per million, 1000 in, 500 out
		{1, 0, 0, 0, 2},
		{1, 1, 0, 1, 9}, // 0.5 rounds up to 1, plus 8
		{0, 0, 0, 1, 8}, // 8 micros
		{3, 0, 0, 0, 6}, // exact
		{1, 5, 0, 0, 1}, // reads never exceed input
		{0, 0, 0, 0, 0},
		{-5, -1, -1, -3, 0}, // negative counts are 0
		{1 << 62, 0, 0, 1 << 62, Micros(1<<63 - 1)},                     // saturates
		{1<<63 - 1, 1<<63 - 1, 1<<63 - 1, 1<<63 - 1, Micros(1<<63 - 1)}, // saturates
	} {
		if got := r.Cost(tc.in, tc.read, tc.write, tc.out); got != tc.want {
			t.Errorf("Cost(%d, %d, %d, %d) = %d, want %d", tc.in, tc.read, tc.write, tc.out, got, tc.want)
		}
	}
	if got := (Rate{Input: 1}).Cost(1, 0, 0, 0); got != 1 {
		t.Errorf("a millionth of a micro-dollar rounds up to 1, got %d", got)
	}
}

// TestRateCostCache: the cost of cache reads and writes at the prices set,
// and at the defaults of absent ones (reads at input, writes at 1.25 ×
// input, exactly), to the micro-dollar.
func TestRateCostCache(t *testing.T) {
	t.Parallel()
	usd := func(s string) *Micros {
		m, ok := ParseUSD(s)
		if !ok {
			t.Fatalf("ParseUSD(%q) failed", s)
		}
		return &m
	}
	claude := Price{Input: usd("3"), Output: usd("15"), CachedInput: usd("0.3"), CacheWrite: usd("3.75")}
	tests := []struct {
		name                 string
		price                Price
		in, read, write, out int64
		want                 Micros
	}{
		// 3×4 + 0.3×20 000 + 3.75×1 000 + 15×100
		{"anthropic turn", claude, 21004, 20000, 1000, 100, 11262},
		// 3×1 000 + 0.3×20 000 + 15×100
		{"openai cached prompt", claude, 21000, 20000, 0, 100, 10500},
		{"absent cacheWrite is 1.25 × input", Price{Input: usd("3"), Output: usd("15"), CachedInput: usd("0.3")}, 21004, 20000, 1000, 100, 11262},
		{"absent cachedInput is input", Price{Input: usd("3"), Output: usd("15")}, 21000, 20000, 0, 100, 64500},
		// 1.25 × 0.000001 per million × 4 000 000 tokens = 5 micros, not 4
		{"default write price exact below a micro", Price{Input: usd("0.000001")}, 4_000_000, 0, 4_000_000, 0, 5},
		{"no price", Price{}, 21004, 20000, 1000, 100, 0},
		{"writes cut to what reads leave of input", claude, 100, 60, 80, 0, 60*0.3 + 40*3.75},
	}
	for _, tc := range tests {
		if got := tc.price.rate().Cost(tc.in, tc.read, tc.write, tc.out); got != tc.want {
			t.Errorf("%s: Cost(%d, %d, %d, %d) = %d, want %d", tc.name, tc.in, tc.read, tc.write, tc.out, got, tc.want)
		}
	}
	if got := (Prices{"m": claude}).Lookup("p", "m").Cost(21004, 20000, 1000, 100); got != 11262 {
		t.Errorf("Lookup then Cost = %d, want 11262", got)
	}
}

func TestDecodeSettingsPrices(t *testing.T) {
	t.Parallel()
	s, errs := DecodeSettings([]byte(`{"prices":{"zai/glm-5":{"input":2,"output":8.5,"cachedInput":0.000001,"cacheWrite":3.75},"openai/*":{"output":1e1}}}`), "")
	if len(errs) > 0 {
		t.Fatalf("DecodeSettings: %v", errs)
	}
	want := Prices{"zai/glm-5": {Input: new(Micros(2_000_000)), Output: new(Micros(8_500_000)), CachedInput: new(Micros(1)), CacheWrite: new(Micros(3_750_000))},
		"openai/*": {Output: new(Micros(10_000_000))}}
	if diff := cmp.Diff(want, s.Prices); diff != "" {
		t.Errorf("prices mismatch (-want +got):\n%s", diff)
	}
	_, errs = DecodeSettings([]byte(`{"prices":{"glm-5":{"input":1.0000001,"output":-1,"cachedInput":"2","cacheWrite":10000.5,"other":1},"bad model":{"input":1},"x/*/y":{"input":1}}}`), "settings")
	var got []string
	for _, e := range errs {
		got = append(got, e.Field+" "+e.Code)
	}
	wantErrs := []string{
		"settings.prices.bad model modelPattern",
		"settings.prices.glm-5.cacheWrite usd",
		"settings.prices.glm-5.cachedInput usd",
		"settings.prices.glm-5.input usd",
		"settings.prices.glm-5.other unknownField",
		"settings.prices.glm-5.output usd",
		"settings.prices.x/*/y modelPattern",
	}
	if diff := cmp.Diff(wantErrs, got); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
}

// TestRateSplit: the cost split part by part sums to the cost for the
// Anthropic and OpenAI examples.
func TestRateSplit(t *testing.T) {
	t.Parallel()
	r := Prices{"m": {Input: new(Micros(3_000_000)), Output: new(Micros(15_000_000)), CachedInput: new(Micros(300_000)),
		CacheWrite: new(Micros(3_750_000))}}.Lookup("p", "m")
	want := [nParts]CostPart{{4, 3_000_000, 12}, {20000, 300_000, 6000}, {1000, 3_750_000, 3750}, {100, 15_000_000, 1500}}
	if got := r.Split(21004, 20000, 1000, 100); got != want {
		t.Errorf("Split = %v, want %v", got, want)
	}
	want = [nParts]CostPart{{1000, 3_000_000, 3000}, {20000, 300_000, 6000}, {0, 3_750_000, 0}, {100, 15_000_000, 1500}}
	if got := r.Split(21000, 20000, 0, 100); got != want {
		t.Errorf("Split = %v, want %v", got, want)
	}
}

// Cost runs for every answered request: it allocates nothing.
func TestRateCostAllocatesNothing(t *testing.T) {
	r := Rate{Input: 3_000_000, Output: 15_000_000, CachedInput: 300_000, writeDefault: true}
	if n := testing.AllocsPerRun(100, func() { _ = r.Cost(21004, 20000, 1000, 100) }); n != 0 {
		t.Errorf("Cost allocates %v times, want 0", n)
	}
}

// TestCacheWriteDefaultsToAQuarterAboveInput: a price without a cache-write
// rate charges prompt-cache writes at 1.25 × its input rate, rounded down
// (Anthropic's five-minute write), for inputs of every size.
func TestCacheWriteDefaultsToAQuarterAboveInput(t *testing.T) {
	t.Parallel()
	for in, want := range map[Micros]Micros{0: 0, 3: 3, 4: 5, 7: 8, 8: 10, 3_000_000: 3_750_000, 3_000_001: 3_750_001} {
		r := Prices{"m": {Input: new(in)}}.Lookup("p", "m")
		if r.CacheWrite != want || !r.writeDefault {
			t.Errorf("input %d: cache write %d (default %v), want %d (default)", in, r.CacheWrite, r.writeDefault, want)
		}
	}
}
