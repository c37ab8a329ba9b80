package limits

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePrices(t *testing.T) {
	t.Parallel()
	text := "# per million tokens\n anthropic/*\t3 15 0.3 3.75 \r\n\nglm-5 2 8\nopenai/gpt-4o 2.5 10 1.25 -\nzai/* - 1e1 - 0.000001\n"
	got, errs := ParsePrices(text)
	if errs != nil {
		t.Fatalf("ParsePrices: %v", errs)
	}
	want := Prices{
		"anthropic/*":   {Input: new(Micros(3_000_000)), Output: new(Micros(15_000_000)), CachedInput: new(Micros(300_000)), CacheWrite: new(Micros(3_750_000))},
		"glm-5":         {Input: new(Micros(2_000_000)), Output: new(Micros(8_000_000))},
		"openai/gpt-4o": {Input: new(Micros(2_500_000)), Output: new(Micros(10_000_000)), CachedInput: new(Micros(1_250_000))},
		"zai/*":         {Output: new(Micros(10_000_000)), CacheWrite: new(Micros(1))},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prices mismatch (-want +got):\n%s", diff)
	}
	wantText := "anthropic/* 3 15 0.3 3.75\nglm-5 2 8 - -\nopenai/gpt-4o 2.5 10 1.25 -\nzai/* - 10 - 0.000001"
	if got := FormatPrices(got); got != wantText {
		t.Errorf("FormatPrices = %q, want %q", got, wantText)
	}
	if p, errs := ParsePrices(" \n# nothing\n"); p != nil || errs != nil {
		t.Errorf("ParsePrices of no entries = %v, %v; want nil, nil", p, errs)
	}
}

// TestParsePricesEveryBadLine: every bad line is reported with its number
// and what is wrong, and nothing is returned.
func TestParsePricesEveryBadLine(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"glm-5 2 8",                 // 1 fine
		"glm-5 3 9",                 // 2 duplicate
		"glm-4.7 2",                 // 3 too few fields
		"bad=model 1 2",             // 4 bad pattern
		"a 1 2 3 4 5",               // 5 too many fields
		"b 1.0000001 2",             // 6 input: too many decimals
		"c 1 2 -3",                  // 7 cachedInput negative
		"d 1 2 3 10000.5",           // 8 cacheWrite too high
		"e 1 x",                     // 9 output not a number
		"x/*/y 1 2",                 // 10 bad pattern
		"f 10000 10000 10000 10000", // 11 fine: the bounds
	}, "\n")
	p, errs := ParsePrices(text)
	if p != nil {
		t.Errorf("ParsePrices with errors returned %v", p)
	}
	var got []string
	for _, e := range errs {
		got = append(got, strconv.Itoa(e.Line)+" "+e.Key+" "+e.Code)
	}
	want := []string{"2  duplicatePrice", "3  priceLineShape", "4  modelPattern", "5  priceLineShape", "6 input usd",
		"7 cachedInput usd", "8 cacheWrite usd", "9 output usd", "10  modelPattern"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
	if e := errs[0].Error(); e != `line 2: "glm-5 3 9": model pattern "glm-5" is already priced on line 1` {
		t.Errorf("first error reads %q", e)
	}
}

func TestParsePricesTooMany(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range MaxPrices + 2 {
		b.WriteString("m" + strconv.Itoa(i) + " 1 2\n")
	}
	_, errs := ParsePrices(b.String())
	if len(errs) != 1 || errs[0].Code != CodeTooManyPrices || errs[0].Line != MaxPrices+1 {
		t.Errorf("errors = %v, want one tooManyPrices on line %d", errs, MaxPrices+1)
	}
}

// FuzzParsePrices fuzzes the prices codec (see fuzzTextCodec): what the
// textarea accepts the settings decoder accepts.
func FuzzParsePrices(f *testing.F) {
	fuzzTextCodec(f, textCodec[Price]{
		parse:  func(s string) (map[string]Price, []LineError) { return ParsePrices(s) },
		format: func(m map[string]Price) string { return FormatPrices(m) },
		decode: func(m map[string]Price) ([]byte, FieldErrors) {
			return marshalled(Settings{Prices: m}, DecodeSettings)
		},
	}, "", "anthropic/* 3 15 0.3 3.75\nglm-5 2 8", "a - - - -", "a 1e1 2.50 0.000001 -", " a\t1 2 \r\n\n# c\n",
		"a 1 2\na 3 4", "a 1", "a 1 2 3 4 5", "a 10000.000001 1", "a -0 1", "x/*/y 1 2", "a 1.0000001 2", "a 1e-7 2")
}
