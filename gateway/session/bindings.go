package session

import (
	"sync"
	"time"
)

// Bindings maps affinity keys to the connection that last served them: a
// binding is written (or refreshed) when a request succeeds, forgotten after
// TTL without use, and at most Max are kept, the least recently used dropped
// first. Safe for concurrent use.
//
// Entries live in one slice linked into a recency list by index, and the map
// holds indices, so 100 000 bindings cost a few megabytes and no pointer
// per binding for the garbage collector to trace (the connection id strings
// are the config's own, shared).
type Bindings struct {
	mu   sync.RWMutex
	ttl  time.Duration
	max  int
	idx  map[Key]int32
	ents []entry
	// perConn counts the bindings of each connection.
	perConn map[string]int
	// head is the most recently used entry, tail the least; free heads the
	// list of unused entries (through next). -1 for none.
	head, tail, free int32
}

type entry struct {
	key        Key
	conn       string
	at         int64 // unix nanos of the last use
	sharedAt   int64 // unix nanos of the last time it was shared (Put's result)
	prev, next int32
}

// Change is what a Put did to a binding, so that a caller sharing bindings
// (cluster mode) writes to the shared store only when it matters.
type Change uint8

const (
	// Same: the binding was refreshed, and last shared recently.
	Same Change = iota
	// New: the key had no binding.
	New
	// Moved: the key was bound to another connection.
	Moved
	// Stale: refreshed, but last shared more than half the TTL ago.
	Stale
)

// NewBindings returns bindings forgotten after ttl without use, at most max
// of them (max < 1 keeps one).
func NewBindings(ttl time.Duration, max int) *Bindings {
	b := &Bindings{idx: make(map[Key]int32), perConn: make(map[string]int), head: -1, tail: -1, free: -1}
	b.Configure(ttl, max)
	return b
}

// Configure changes the TTL and the bound; bindings beyond a lowered bound
// are dropped, least recently used first.
func (b *Bindings) Configure(ttl time.Duration, max int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ttl, b.max = ttl, cmpMax(max, 1)
	for len(b.idx) > b.max {
		b.drop(b.tail)
	}
}

func cmpMax(a, b int) int {
	if a < b {
		return b
	}
	return a
}

// Get returns the connection bound to k at now, and false when there is
// none or it has expired (an expired binding is forgotten). It does not
// refresh the binding: only a success does (Put).
func (b *Bindings) Get(k Key, now time.Time) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i, ok := b.idx[k]
	if !ok {
		return "", false
	}
	e := &b.ents[i]
	if now.UnixNano()-e.at >= int64(b.ttl) {
		b.drop(i)
		return "", false
	}
	return e.conn, true
}

// Bound reports whether k has a binding at now, under a read lock only: a
// caller that writes a binding only when there is none (a one-off request)
// checks first, so that concurrent identical requests do not contend.
func (b *Bindings) Bound(k Key, now time.Time) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	i, ok := b.idx[k]
	return ok && now.UnixNano()-b.ents[i].at < int64(b.ttl)
}

// Put binds k to conn at now (a refresh when it already is), making it the
// most recently used; when the bound is reached the least recently used
// binding is dropped. It reports what changed; any result but Same counts
// as shared at now.
func (b *Bindings) Put(k Key, conn string, now time.Time) Change {
	return b.put(k, conn, now, false)
}

// Adopt is Put of a binding read from the shared store: it counts as
// shared at now.
func (b *Bindings) Adopt(k Key, conn string, now time.Time) {
	b.put(k, conn, now, true)
}

func (b *Bindings) put(k Key, conn string, now time.Time, shared bool) Change {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now.UnixNano()
	if i, ok := b.idx[k]; ok {
		e := &b.ents[i]
		ch := Same
		switch {
		case e.conn != conn:
			b.count(e.conn, -1)
			b.count(conn, 1)
			ch = Moved
		case t-e.sharedAt > int64(b.ttl)/2:
			ch = Stale
		}
		e.conn, e.at = conn, t
		if ch != Same || shared {
			e.sharedAt = t
		}
		b.unlink(i)
		b.pushFront(i)
		return ch
	}
	// Expired entries at the tail go first; then the bound.
	for b.tail >= 0 && t-b.ents[b.tail].at >= int64(b.ttl) {
		b.drop(b.tail)
	}
	if len(b.idx) >= b.max {
		b.drop(b.tail)
	}
	var i int32
	if b.free >= 0 {
		i = b.free
		b.free = b.ents[i].next
	} else {
		b.ents = append(b.ents, entry{})
		i = int32(len(b.ents) - 1)
	}
	b.ents[i] = entry{key: k, conn: conn, at: t, sharedAt: t}
	b.idx[k] = i
	b.count(conn, 1)
	b.pushFront(i)
	return New
}

// Forget drops the binding of k, if any.
func (b *Bindings) Forget(k Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i, ok := b.idx[k]; ok {
		b.drop(i)
	}
}

// Len is the number of bindings held, expired ones not yet dropped included.
func (b *Bindings) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.idx)
}

// Counts sets n[j] to the number of bindings of conns[j] (expired ones not
// yet dropped included): where new sessions should go is where fewest are bound.
func (b *Bindings) Counts(conns []string, n []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for j, c := range conns {
		n[j] = b.perConn[c]
	}
}

func (b *Bindings) count(conn string, d int) {
	if v := b.perConn[conn] + d; v > 0 {
		b.perConn[conn] = v
	} else {
		delete(b.perConn, conn)
	}
}

func (b *Bindings) drop(i int32) {
	if i < 0 {
		return
	}
	delete(b.idx, b.ents[i].key)
	b.count(b.ents[i].conn, -1)
	b.unlink(i)
	b.ents[i] = entry{next: b.free, prev: -1}
	b.free = i
}

func (b *Bindings) unlink(i int32) {
	e := &b.ents[i]
	if e.prev >= 0 {
		b.ents[e.prev].next = e.next
	} else {
		b.head = e.next
	}
	if e.next >= 0 {
		b.ents[e.next].prev = e.prev
	} else {
		b.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (b *Bindings) pushFront(i int32) {
	e := &b.ents[i]
	e.prev, e.next = -1, b.head
	if b.head >= 0 {
		b.ents[b.head].prev = i
	}
	b.head = i
	if b.tail < 0 {
		b.tail = i
	}
}
