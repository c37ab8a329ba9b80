package gateway

import "time"

// The order in which a request's candidate connections are tried, kept
// apart from the health checks and the errors of choose so that it can be
// read (and tested) on its own: highest priority first, equal priorities
// rotated so that they share the load, and, for a request that must queue,
// shortest expected wait first with that order breaking ties.

// priorityOrder appends to dst the indices of ts, which are sorted by
// priority (highest first), group by group of equal priority, each group
// rotated by rot: successive calls with successive rot start each group at
// its next member. ts has at most maxCandidates elements.
func priorityOrder[T any](dst []uint8, ts []T, priority func(T) int, rot uint64) []uint8 {
	n := len(ts)
	for i := 0; i < n; {
		j := i
		for j < n && priority(ts[j]) == priority(ts[i]) {
			j++
		}
		size := j - i
		off := int(rot % uint64(size))
		for k := range size {
			dst = append(dst, uint8(i+(off+k)%size))
		}
		i = j
	}
	return dst
}

func targetPriority(t *target) int { return t.c.priority }

// sortByWait sorts idx by waits (waits[k] belongs to idx[k]), shortest
// first, keeping the order of equal waits; it sorts waits with it.
func sortByWait(idx []uint8, waits []time.Duration) {
	// Insertion sort: a handful of candidates, and stable.
	for k := 1; k < len(idx); k++ {
		for j := k; j > 0 && waits[j] < waits[j-1]; j-- {
			waits[j], waits[j-1] = waits[j-1], waits[j]
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
}
