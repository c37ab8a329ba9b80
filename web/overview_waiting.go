package web

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

// WaitingKey is one client key waiting at a bottleneck gate and its share of the
// gate's slots while the waiting keys stay backlogged: its weight over the total
// weight of the keys waiting there.
type WaitingKey struct {
	// ID is the key's id; "" for requests of no key (counted together).
	ID     string
	Name   string // the key's name; "" when the gateway does not know the key
	Weight int
	Queued int
	// Share is Weight ÷ the total weight of the keys waiting at the gate (0–1).
	Share float64
}

// waitingKeys lists the keys waiting at g from its QueuedByClient, named and
// weighed from clients (a key the live view does not list weighs
// limits.DefaultWeight), largest share first, then by name and id, requests
// of no key after the keys of their share.
func waitingKeys(g live.Gate, clients map[string]live.Client) []WaitingKey {
	var (
		out   []WaitingKey
		total int
	)
	for id, n := range g.QueuedByClient {
		if n <= 0 {
			continue
		}
		w := WaitingKey{ID: id, Queued: n, Weight: limits.DefaultWeight}
		if c, ok := clients[id]; ok {
			w.Name = c.Name
			if c.Weight > 0 {
				w.Weight = c.Weight
			}
		}
		total += w.Weight
		out = append(out, w)
	}
	for i := range out {
		out[i].Share = float64(out[i].Weight) / float64(total)
	}
	slices.SortFunc(out, func(a, b WaitingKey) int {
		return cmp.Or(cmp.Compare(b.Weight, a.Weight), cmp.Compare(noKey(a), noKey(b)), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out
}

// noKey is 1 for the requests of no key, which are listed after the keys.
func noKey(w WaitingKey) int {
	if w.ID == "" {
		return 1
	}
	return 0
}

// bottleneckName is the name of the block's bottleneck gate, as its row shows it.
func (c ConnectionBlock) bottleneckName(p Page) string {
	for _, g := range c.Gates {
		if g.Key == c.Bottleneck {
			return gateName(p, g)
		}
	}
	return ""
}

// waitingAt lists the keys waiting at the gate keyed bottleneck among gates.
func waitingAt(gates []GateBar, bottleneck string, clients map[string]live.Client) []WaitingKey {
	if bottleneck == "" {
		return nil
	}
	for _, g := range gates {
		if g.Key == bottleneck {
			return waitingKeys(g.Gate, clients)
		}
	}
	return nil
}

// priorityAt is the queue of the gate keyed bottleneck among gates by priority class.
func priorityAt(gates []GateBar, bottleneck string) map[string]int {
	for _, g := range gates {
		if bottleneck != "" && g.Key == bottleneck {
			return g.QueuedByPriority
		}
	}
	return nil
}

// priorityBreakdown writes a queue by class, highest class first ("3 interactive
// · 40 batch"), or "" when every waiter is of the default class (nothing to say).
func priorityBreakdown(p Page, by map[string]int) string {
	if len(by) == 0 || len(by) == 1 && by[limits.DefaultPriority] > 0 {
		return ""
	}
	out := ""
	for _, name := range limits.PriorityNames {
		if n := by[name]; n > 0 {
			if out != "" {
				out += " · "
			}
			out += p.L.T("overview.queuedClass", p.L.Int(int64(n)), p.L.T("priority."+name))
		}
	}
	return out
}

// shareText writes a share as a whole percentage ("75%"); a share that rounds
// to 0 but is not 0 is "<1%".
func shareText(s float64) string {
	p := math.Round(s * 100)
	if p == 0 && s > 0 {
		return "<1%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// KeyCapWait is a client key whose requests wait at its own concurrency cap
// (maxConcurrent): its requests holding a slot of the key's gate, the cap,
// and how many wait there.
type KeyCapWait struct {
	ID, Name              string
	InFlight, Cap, Queued int
}

// keyCapWaits lists the key gates of gates that hold waiters, named from
// clients, most waiting first, then by name and id.
func keyCapWaits(gates []live.Gate, clients []live.Client) []KeyCapWait {
	var out []KeyCapWait
	for _, g := range gates {
		if g.Level != live.LevelKey || g.Queued <= 0 || g.Shadow {
			continue
		}
		w := KeyCapWait{ID: strings.TrimPrefix(g.Key, "key:"), InFlight: g.InFlight, Cap: cmp.Or(g.EffectiveCap, g.Cap), Queued: g.Queued}
		for _, c := range clients {
			if c.ID == w.ID {
				w.Name = c.Name
				w.Cap = cmp.Or(w.Cap, c.Cap)
			}
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b KeyCapWait) int {
		return cmp.Or(cmp.Compare(b.Queued, a.Queued), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out
}
