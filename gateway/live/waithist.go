package live

import "time"

// NumWaitBuckets is the number of buckets of a WaitHistogram: one for requests
// admitted at once (no wait), 18 doubling from 1 ms to 131.072 s, and +Inf.
const NumWaitBuckets = 20

// WaitHistogram counts admitted requests by how long they waited. Bucket i
// holds the waits in (WaitBucketBound(i-1), WaitBucketBound(i)]: bucket 0 the
// requests admitted at once, bucket 1 the waits up to 1 ms, bucket 2 those in
// (1 ms, 2 ms], …, the last one those above 131.072 s. Counts are per bucket
// (not cumulative across buckets) and only grow while the gate lives, so the
// difference of two snapshots is the histogram of the admissions between them.
// It is a plain array: copying a snapshot allocates nothing.
type WaitHistogram [NumWaitBuckets]int64

// WaitBucketBound is the upper bound of bucket i of a WaitHistogram (inclusive):
// 0 for bucket 0, 1 ms << (i-1) for the finite buckets, and a negative
// duration for the last, unbounded one.
func WaitBucketBound(i int) time.Duration {
	switch {
	case i <= 0:
		return 0
	case i >= NumWaitBuckets-1:
		return -1
	default:
		return time.Millisecond << (i - 1)
	}
}

// WaitBucket is the bucket a wait of d falls in. Admission counts into
// WaitHistogram[WaitBucket(d)] directly, once per gate of a path.
func WaitBucket(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	i := 1
	for i < NumWaitBuckets-1 && d > time.Millisecond<<(i-1) {
		i++
	}
	return i
}

// Observe counts one admission that waited d.
func (h *WaitHistogram) Observe(d time.Duration) {
	h[WaitBucket(d)]++
}

// Count is the number of admissions the histogram holds.
func (h *WaitHistogram) Count() int64 {
	var n int64
	for _, c := range h {
		n += c
	}
	return n
}

// Add adds o's counts to h.
func (h *WaitHistogram) Add(o *WaitHistogram) {
	for i := range h {
		h[i] += o[i]
	}
}

// Since returns the admissions h holds that earlier, an older snapshot of the
// same gate, did not: h minus earlier, bucket by bucket. When some bucket went
// down — the gate was dropped and made anew in between, so its counts started
// again from zero — it returns h itself, which then holds only admissions
// made after earlier was taken.
func (h *WaitHistogram) Since(earlier *WaitHistogram) WaitHistogram {
	var out WaitHistogram
	for i := range h {
		if h[i] < earlier[i] {
			return *h
		}
		out[i] = h[i] - earlier[i]
	}
	return out
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) of the waits the histogram
// holds, as Prometheus' histogram_quantile does: it finds the bucket holding
// the rank q×Count and interpolates linearly between that bucket's bounds.
// Bucket 0 (admitted at once) answers 0; a rank in the unbounded last bucket
// answers the largest finite bound. ok is false when the histogram is empty.
func (h *WaitHistogram) Quantile(q float64) (d time.Duration, ok bool) {
	total := h.Count()
	if total <= 0 {
		return 0, false
	}
	q = min(max(q, 0), 1)
	rank := q * float64(total)
	var below int64 // admissions in the buckets before i
	for i, c := range h {
		if c <= 0 || float64(below+c) < rank {
			below += max(c, 0)
			continue
		}
		if i == 0 {
			return 0, true
		}
		if i == NumWaitBuckets-1 {
			return WaitBucketBound(i - 1), true
		}
		lo, hi := WaitBucketBound(i-1), WaitBucketBound(i)
		frac := (rank - float64(below)) / float64(c)
		return lo + time.Duration(frac*float64(hi-lo)), true
	}
	// rounding left the rank above every bucket: the largest wait seen
	for i := NumWaitBuckets - 1; i > 0; i-- {
		if h[i] > 0 {
			if i == NumWaitBuckets-1 {
				return WaitBucketBound(i - 1), true
			}
			return WaitBucketBound(i), true
		}
	}
	return 0, true
}
