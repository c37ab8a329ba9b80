package admission

// Ledger keeps the count of slots held in each gate. The Controller keeps its
// waiters, queues and fairness itself and asks the ledger only to count, so a
// cluster mode can put the counts in a shared store (for instance Redis, with
// one all-or-nothing script for TryTake) and make caps hold across replicas.
//
// A Controller calls its ledger with its own mutex held and never shares it
// with another Controller, so an in-process implementation needs no locking.
// Slices passed in are only valid during the call.
type Ledger interface {
	// Open registers the gate key and returns the handle by which the
	// controller names that gate in later calls.
	Open(key string) int
	// Close forgets a handle; the controller calls it only for a gate that
	// holds no slot of its own.
	Close(id int)
	// TryTake takes one slot in every gate ids[i] whose count is below
	// caps[i] (a cap of 0 never blocks), all or none. It returns -1 when it
	// took them, else the index in ids of the first gate without room.
	TryTake(ids, caps []int) int
	// Put returns one slot to every gate in ids.
	Put(ids []int)
	// InFlight reports the slots held in gate id.
	InFlight(id int) int
}

// memoryLedger is the in-process Ledger: a slice of counts indexed by handle.
type memoryLedger struct {
	counts []int
	free   []int
}

// NewMemoryLedger returns the in-process Ledger that New uses by default.
func NewMemoryLedger() Ledger { return &memoryLedger{} }

func (l *memoryLedger) Open(string) int {
	if n := len(l.free); n > 0 {
		id := l.free[n-1]
		l.free = l.free[:n-1]
		return id
	}
	l.counts = append(l.counts, 0)
	return len(l.counts) - 1
}

func (l *memoryLedger) Close(id int) {
	l.counts[id] = 0
	l.free = append(l.free, id)
}

func (l *memoryLedger) TryTake(ids, caps []int) int {
	for i, id := range ids {
		if caps[i] > 0 && l.counts[id] >= caps[i] {
			return i
		}
	}
	for _, id := range ids {
		l.counts[id]++
	}
	return -1
}

func (l *memoryLedger) Put(ids []int) {
	for _, id := range ids {
		l.counts[id]--
	}
}

func (l *memoryLedger) InFlight(id int) int { return l.counts[id] }
