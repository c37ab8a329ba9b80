package live

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWaitBucket(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		wait time.Duration
		want int
	}{
		{name: "admitted at once", wait: 0, want: 0},
		{name: "negative counts as none", wait: -time.Second, want: 0},
		{name: "a nanosecond", wait: 1, want: 1},
		{name: "1 ms is inclusive", wait: time.Millisecond, want: 1},
		{name: "just above 1 ms", wait: time.Millisecond + 1, want: 2},
		{name: "2 ms", wait: 2 * time.Millisecond, want: 2},
		{name: "3 ms", wait: 3 * time.Millisecond, want: 3},
		{name: "400 ms", wait: 400 * time.Millisecond, want: 10},
		{name: "1.8 s", wait: 1800 * time.Millisecond, want: 12},
		{name: "largest finite bound", wait: 131072 * time.Millisecond, want: 18},
		{name: "above the largest bound", wait: 131072*time.Millisecond + 1, want: 19},
		{name: "an hour", wait: time.Hour, want: 19},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := WaitBucket(tt.wait)
			if got != tt.want {
				t.Fatalf("WaitBucket(%v) = %d, want %d", tt.wait, got, tt.want)
			}
			if lo, hi := WaitBucketBound(got-1), WaitBucketBound(got); got > 0 && (tt.wait <= lo || (hi >= 0 && tt.wait > hi)) {
				t.Errorf("wait %v outside its bucket's bounds (%v, %v]", tt.wait, lo, hi)
			}
		})
	}
}

func TestWaitHistogramQuantile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		h      WaitHistogram
		q      float64
		want   time.Duration
		wantOK bool
	}{
		{name: "empty", q: 0.99},
		{name: "all at once", h: WaitHistogram{0: 10}, q: 0.99, want: 0, wantOK: true},
		// 100 waits in (2 ms, 4 ms]: the median is halfway, the 99th near the top
		{name: "median interpolated", h: WaitHistogram{3: 100}, q: 0.5, want: 3 * time.Millisecond, wantOK: true},
		{name: "p99 interpolated", h: WaitHistogram{3: 100}, q: 0.99, want: 3980 * time.Microsecond, wantOK: true},
		// 98 at once, 2 in (1.024 s, 2.048 s]: rank 99 is the first of those two
		{name: "p99 past the immediate ones", h: WaitHistogram{0: 98, 12: 2}, q: 0.99, want: 1536 * time.Millisecond, wantOK: true},
		{name: "median among the immediate ones", h: WaitHistogram{0: 98, 12: 2}, q: 0.5, want: 0, wantOK: true},
		{name: "rank on a bucket's top", h: WaitHistogram{10: 5, 12: 5}, q: 0.5, want: 512 * time.Millisecond, wantOK: true},
		{name: "unbounded bucket answers the largest bound", h: WaitHistogram{19: 3}, q: 0.99, want: 131072 * time.Millisecond, wantOK: true},
		{name: "q clamped", h: WaitHistogram{3: 100}, q: 2, want: 4 * time.Millisecond, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := tt.h.Quantile(tt.q)
			if ok != tt.wantOK {
				t.Fatalf("Quantile(%v) ok = %v, want %v", tt.q, ok, tt.wantOK)
			}
			if d := got - tt.want; d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}

func TestWaitHistogramSince(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		earlier, now  WaitHistogram
		want          WaitHistogram
		wantWindowLen int64
	}{
		{
			name: "difference", earlier: WaitHistogram{0: 5, 3: 10}, now: WaitHistogram{0: 7, 3: 110},
			want: WaitHistogram{0: 2, 3: 100}, wantWindowLen: 102,
		},
		{
			name: "nothing new", earlier: WaitHistogram{0: 5, 3: 10}, now: WaitHistogram{0: 5, 3: 10},
			want: WaitHistogram{},
		},
		{
			// the gate was dropped and made anew: its counts restarted from zero
			name: "reset keeps the newer counts", earlier: WaitHistogram{0: 50, 5: 50}, now: WaitHistogram{0: 60, 5: 10},
			want: WaitHistogram{0: 60, 5: 10}, wantWindowLen: 70,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.now.Since(&tt.earlier)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Since mismatch (-want +got):\n%s", diff)
			}
			if n := got.Count(); n != tt.wantWindowLen {
				t.Errorf("Count = %d, want %d", n, tt.wantWindowLen)
			}
		})
	}
}

func TestWaitHistogramAdd(t *testing.T) {
	t.Parallel()
	h := WaitHistogram{0: 1, 4: 2}
	h.Add(&WaitHistogram{0: 3, 19: 1})
	if diff := cmp.Diff(WaitHistogram{0: 4, 4: 2, 19: 1}, h); diff != "" {
		t.Errorf("Add mismatch (-want +got):\n%s", diff)
	}
}
