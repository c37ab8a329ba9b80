package gateway

import (
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/health"
)

// POST /v1/messages/count_tokens (Anthropic) is passed through to a
// connection serving the model like /v1/messages, but it is no inference:
// it takes no concurrency slot (no gate, no queue) and does not count toward
// rpm/rpd or the token budgets. It still goes only to a connection that is
// healthy for the model (not cooling down, suspended or with its breaker
// open), and fails over like any request; it never takes a half-open
// breaker's one probe, and its outcome does not feed the breaker. The key's
// own rpm applies to it (freeKeyTurn): a key pacing itself is paced on every
// route, or counting could stand in for a probe of its limits.

// freePermit is the grant of a request that holds no slot.
type freePermit struct{}

func (freePermit) Release()              {}
func (freePermit) Waited() time.Duration { return 0 }

// noBreaker is the breaker callback of an attempt the breaker does not count.
func noBreaker(error) {}

// chooseFree picks the connection for a count_tokens attempt: the first
// untried target, highest priority first (equal priorities rotated), that
// is healthy for the model, into x.cur. With none it leaves x.cur zero and
// returns, when nothing was tried yet, NO_HEALTHY_CONNECTION.
func (x *exchange) chooseFree() *apiError {
	x.cur = pick{}
	var orderBuf [maxCandidates]uint8
	order := priorityOrder(orderBuf[:0], x.targets, targetPriority, x.g.rotate.Add(1))
	now := x.g.now()
	for _, i := range order {
		if x.tried&(1<<i) != 0 {
			continue
		}
		t := x.targets[i]
		if why, _ := x.check(t.c, t.model, now); why != health.Available {
			continue
		}
		x.cur = pick{t: t, idx: int(i), permit: freePermit{}, done: noBreaker}
		return nil
	}
	if x.tried != 0 {
		return nil
	}
	return errNoHealthyNow(x.info.Model)
}

// freeKeyTurn takes the key's rpm turn for a count request (before its
// connection is chosen: it holds no slot while it waits), within the wait
// bound of its first candidate. The turn is used at dispatch and given back
// if nothing is dispatched (attempt).
func (x *exchange) freeKeyTurn() *apiError {
	if x.key.Lim.Spacing == 0 || len(x.targets) == 0 {
		return nil
	}
	return x.keyTurn(x.g.now(), x.request(x.targets[0]).MaxWait)
}
