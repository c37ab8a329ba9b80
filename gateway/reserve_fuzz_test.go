package gateway

import (
	"math"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// FuzzEstimateCost: no request body, settings or price makes the estimate
// or its cost wrap: both stay within [0, MaxInt64], the output part within
// maxOutputReserve, and the estimate at least the input part.
func FuzzEstimateCost(f *testing.F) {
	f.Add([]byte(`{"model":"m","max_tokens":999999999999999999,"n":999999999999999999}`), 4096, 65536, int64(10_000_000_000))
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`), 1, 1, int64(1))
	f.Add([]byte(`{"contents":[{"parts":[{"inlineData":{}}]}],"generationConfig":{"maxOutputTokens":5,"candidateCount":8}}`), 1_000_000, 10_000_000, int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, body []byte, defOut, maxOut int, price int64) {
		if defOut < 1 || defOut > 1_000_000 || maxOut < 1 || maxOut > 10_000_000 || price < 0 {
			t.Skip()
		}
		info, err := usage.Scan(body)
		if err != nil {
			info = usage.Request{MaxOutput: usage.GeminiMaxOutput(body), Choices: usage.GeminiCandidates(body)}
		}
		in, out := estimateTokens(body, info, defOut, maxOut)
		if in < 0 || out < 0 || out > int64(maxOut) {
			t.Fatalf("estimate in %d, out %d (maxOut %d)", in, out, maxOut)
		}
		if est := ratelimit.SatAdd(in, out); est < in || est < out {
			t.Fatalf("estimate %d wrapped (in %d, out %d)", est, in, out)
		}
		r := limits.Rate{Input: limits.Micros(price), Output: limits.Micros(price), CachedInput: limits.Micros(price), Found: true}
		if c := ratelimit.EstimateCost(r, in, out); c < 0 {
			t.Fatalf("cost %d of in %d, out %d at %d", c, in, out, price)
		}
		if c := int64(r.Cost(math.MaxInt64, in, in, math.MaxInt64)); c < 0 {
			t.Fatalf("cost %d of the largest usage at %d", c, price)
		}
	})
}
