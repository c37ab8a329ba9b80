package admission

// The three queues of the admission structures are binary min-heaps whose items
// know their own place, so that a waiter that leaves or moves is taken out or
// re-placed in O(log n): a gate's flows by turn (waitQueue.items), a flow's classes
// by head arrival (flow.classes), and a gate's classes below level 0 by when they
// move up (gateQueue.aging). They share minHeap; an order type says how each is
// ordered and where an item keeps its index.

// heapOrder orders the items of a minHeap and records each one's index. Its
// implementations are zero-size types: the order is the heap's type, not a field.
type heapOrder[T any] interface {
	less(a, b T) bool
	setIndex(x T, i int)
	index(x T) int
}

// minHeap is a binary min-heap of T under the order O. It is a slice, so that a
// queue's items can be read (the first, all of them) as a slice.
type minHeap[T any, O heapOrder[T]] []T

func (h *minHeap[T, O]) push(x T) {
	var o O
	o.setIndex(x, len(*h))
	*h = append(*h, x)
	h.up(len(*h) - 1)
}

// remove takes x out of the heap; its index becomes -1.
func (h *minHeap[T, O]) remove(x T) {
	var (
		o    O
		zero T
	)
	i, last := o.index(x), len(*h)-1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = zero
	*h = (*h)[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	o.setIndex(x, -1)
}

// fix restores the order after x's key changed either way.
func (h *minHeap[T, O]) fix(x T) {
	var o O
	i := o.index(x)
	h.down(i)
	h.up(i)
}

// sink restores the order after x's key grew (it can only move down).
func (h *minHeap[T, O]) sink(x T) {
	var o O
	h.down(o.index(x))
}

func (h minHeap[T, O]) swap(i, j int) {
	var o O
	h[i], h[j] = h[j], h[i]
	o.setIndex(h[i], i)
	o.setIndex(h[j], j)
}

func (h minHeap[T, O]) up(i int) {
	var o O
	for i != 0 {
		p := (i - 1) / 2
		if !o.less(h[i], h[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h minHeap[T, O]) down(i int) {
	var o O
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && o.less(h[r], h[l]) {
			m = r
		}
		if !o.less(h[m], h[i]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// byTurn orders a gate's flows (flowBefore); byArrival a flow's classes by their
// heads' arrival numbers; byDue a gate's aging classes by when they move up.
type (
	byTurn    struct{}
	byArrival struct{}
	byDue     struct{}
)

func (byTurn) less(a, b *flow) bool    { return flowBefore(a, b) }
func (byTurn) setIndex(f *flow, i int) { f.idx = i }
func (byTurn) index(f *flow) int       { return f.idx }

func (byArrival) less(a, b *class) bool    { return a.head.seq < b.head.seq }
func (byArrival) setIndex(k *class, i int) { k.idx = i }
func (byArrival) index(k *class) int       { return k.idx }

func (byDue) less(a, b *class) bool    { return a.due < b.due }
func (byDue) setIndex(k *class, i int) { k.ageIdx = i }
func (byDue) index(k *class) int       { return k.ageIdx }
