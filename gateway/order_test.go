package gateway

import (
	"slices"
	"testing"
	"time"
)

// TestPriorityOrder: highest priority first, each group of equal priority
// rotated by the call's rotation, groups never mixed.
func TestPriorityOrder(t *testing.T) {
	t.Parallel()
	id := func(p int) int { return p }
	tests := []struct {
		name  string
		prios []int // sorted, highest first
		rot   uint64
		want  []uint8
	}{
		{name: "none", prios: nil, rot: 5, want: nil},
		{name: "one", prios: []int{7}, rot: 3, want: []uint8{0}},
		{name: "distinct priorities keep their order", prios: []int{3, 2, 1}, rot: 1, want: []uint8{0, 1, 2}},
		{name: "equal pair, even rotation", prios: []int{1, 1}, rot: 2, want: []uint8{0, 1}},
		{name: "equal pair, odd rotation", prios: []int{1, 1}, rot: 3, want: []uint8{1, 0}},
		{name: "three equal, rotation 1", prios: []int{0, 0, 0}, rot: 1, want: []uint8{1, 2, 0}},
		{name: "three equal, rotation 2", prios: []int{0, 0, 0}, rot: 2, want: []uint8{2, 0, 1}},
		{name: "groups rotate on their own", prios: []int{5, 5, 2, 2, 2}, rot: 1, want: []uint8{1, 0, 3, 4, 2}},
		{name: "single between groups", prios: []int{5, 5, 4, 2, 2}, rot: 3, want: []uint8{1, 0, 2, 4, 3}},
		{name: "negative priorities", prios: []int{-1, -3, -3}, rot: 1, want: []uint8{0, 2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := priorityOrder(nil, tc.prios, id, tc.rot)
			if !slices.Equal(got, tc.want) {
				t.Errorf("priorityOrder(%v, rot %d) = %v, want %v", tc.prios, tc.rot, got, tc.want)
			}
		})
	}

	// Successive rotations give each member of a group the first turn
	// equally often.
	first := map[uint8]int{}
	for rot := range uint64(300) {
		first[priorityOrder(nil, []int{1, 1, 1}, id, rot)[0]]++
	}
	if first[0] != 100 || first[1] != 100 || first[2] != 100 {
		t.Errorf("first turns over 300 rotations = %v, want 100 each", first)
	}
}

// TestSortByWait: shortest expected wait first; equal waits keep their
// (priority) order.
func TestSortByWait(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name    string
		idx     []uint8
		waits   []time.Duration
		want    []uint8
		wantWts []time.Duration
	}{
		{name: "none", idx: []uint8{}, waits: []time.Duration{}, want: []uint8{}, wantWts: []time.Duration{}},
		{name: "one", idx: []uint8{4}, waits: []time.Duration{ms}, want: []uint8{4}, wantWts: []time.Duration{ms}},
		{name: "already sorted", idx: []uint8{0, 1, 2}, waits: []time.Duration{0, ms, 2 * ms}, want: []uint8{0, 1, 2}, wantWts: []time.Duration{0, ms, 2 * ms}},
		{name: "reversed", idx: []uint8{0, 1, 2}, waits: []time.Duration{3 * ms, 2 * ms, ms}, want: []uint8{2, 1, 0}, wantWts: []time.Duration{ms, 2 * ms, 3 * ms}},
		{name: "ties keep order", idx: []uint8{3, 1, 2, 0}, waits: []time.Duration{ms, 0, ms, 0}, want: []uint8{1, 0, 3, 2}, wantWts: []time.Duration{0, 0, ms, ms}},
		{name: "all equal", idx: []uint8{2, 0, 1}, waits: []time.Duration{ms, ms, ms}, want: []uint8{2, 0, 1}, wantWts: []time.Duration{ms, ms, ms}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			idx, waits := slices.Clone(tc.idx), slices.Clone(tc.waits)
			sortByWait(idx, waits)
			if !slices.Equal(idx, tc.want) || !slices.Equal(waits, tc.wantWts) {
				t.Errorf("sortByWait(%v, %v) = %v, %v; want %v, %v", tc.idx, tc.waits, idx, waits, tc.want, tc.wantWts)
			}
		})
	}
}
