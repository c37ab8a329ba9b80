package health

import (
	"maps"
	"sync"
)

// Caps keeps a config's caps (by gate key) and hands admission the caps in
// force: every adaptive gate's effective cap, as its Learner has it, in
// place of the configured one. Push is how the caps reach admission; Caps
// calls it under its own lock, so pushes never overtake each other. Its
// methods are safe for concurrent use.
type Caps struct {
	Learn *Learner
	Push  func(map[string]int)

	mu   sync.Mutex
	conf map[string]int
}

// Set keeps conf as the configured caps and pushes the caps in force.
func (c *Caps) Set(conf map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conf = conf
	c.pushLocked()
}

// Repush pushes the caps in force again, after the learner changed an
// effective cap; nothing before the first Set.
func (c *Caps) Repush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conf != nil {
		c.pushLocked()
	}
}

func (c *Caps) pushLocked() {
	eff := c.Learn.Effective()
	if len(eff) == 0 {
		c.Push(c.conf)
		return
	}
	caps := maps.Clone(c.conf)
	for key, n := range eff {
		if _, ok := caps[key]; ok {
			caps[key] = n
		}
	}
	c.Push(caps)
}

// Configured returns the configured cap of every adaptive gate of the
// config in force (admission reports the effective cap in force), by key;
// nil when no gate is adaptive.
func (c *Caps) Configured() map[string]int {
	eff := c.Learn.Effective()
	if len(eff) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(eff))
	for key := range eff {
		if n, ok := c.conf[key]; ok {
			out[key] = n
		}
	}
	return out
}
