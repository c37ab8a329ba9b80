package admission

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Prepare returns req with a cache for its resolved path, for a request
// that is reused many times (the gateway builds one per connection and
// model): a Controller then looks its gates up by key once, not on every
// acquisition, and re-resolves only after a gate was dropped (SetCaps) or
// when used with another Controller. Gates must not change afterwards;
// copies of the returned Request share the cache and may change the other
// fields. Other Admitters ignore the cache.
func Prepare(req Request) Request {
	req.route = &routeCache{}
	return req
}

// routeCache holds the latest resolution of a prepared Request's path.
type routeCache struct{ r atomic.Pointer[resolvedRoute] }

// resolvedRoute is immutable once stored, so several controllers and
// goroutines may read it without a lock; it is valid for c while c.gen is gen.
type resolvedRoute struct {
	c     *Controller
	gen   uint64
	n     int
	gates [maxPath]*gate
}

// resolve looks up (creating if needed) the gates of req's path into out,
// through req's route cache when it is prepared and still valid.
func (c *Controller) resolve(req *Request, out *[maxPath]*gate) (int, error) {
	refs := req.Gates
	if req.route != nil {
		if r := req.route.r.Load(); r != nil && r.c == c && r.gen == c.gen && r.n == len(refs) {
			*out = r.gates
			return r.n, nil
		}
		n, err := c.resolveKeys(refs, out)
		if err == nil {
			r := &resolvedRoute{c: c, gen: c.gen, n: n}
			copy(r.gates[:], out[:n])
			req.route.r.Store(r)
		}
		return n, err
	}
	return c.resolveKeys(refs, out)
}

// resolveKeys looks up (creating if needed) the gates of refs into out.
func (c *Controller) resolveKeys(refs []GateRef, out *[maxPath]*gate) (int, error) {
	if len(refs) > maxPath {
		return 0, fmt.Errorf("admission: path has %d gates, at most %d", len(refs), maxPath)
	}
	for i := range refs {
		g := c.gates[refs[i].Key]
		if g == nil {
			if refs[i].Key == "" {
				return 0, errors.New("admission: gate with an empty key")
			}
			g = c.addGate(refs[i].Level, refs[i].Key)
		}
		for j := range i {
			if out[j] == g {
				return 0, fmt.Errorf("admission: gate %s named twice in one path", g.key)
			}
		}
		out[i] = g
	}
	return len(refs), nil
}

func (c *Controller) addGate(level, key string) *gate {
	if level == "" {
		level = LevelOf(key)
	}
	g := &gate{key: key, level: level, id: c.ledger.Open(key)}
	c.gates[key] = g
	return g
}
