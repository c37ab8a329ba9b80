package gateway

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/gateway/session"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// affinity is a request's session and its affinity binding (DESIGN.md,
// "Sessions"): which connection holds its prompt cache, and what the
// connection choice made of that.
type affinity struct {
	// session is the stored form of the session id (session.Hash), "" without one.
	session string
	// key is the affinity key; 0 when the request has none (Gemini, a
	// free route).
	key session.Key
	// result is what the choice did with the binding.
	result affinityResult
}

// affinityResult is the request log's and the metric's word for how a
// request's connection choice used its binding.
type affinityResult uint8

const (
	affinityNone    affinityResult = iota // no affinity key, or affinity off
	affinityHit                           // the bound connection served it
	affinityBound                         // no binding: one was written now
	affinitySpilled                       // bound elsewhere, served here (and bound here now)
)

// String is the result's label ("" for none in the request log).
func (r affinityResult) String() string {
	switch r {
	case affinityHit:
		return "hit"
	case affinityBound:
		return "bound"
	case affinitySpilled:
		return "spilled"
	}
	return ""
}

// sessionOf reads r's session id (headers, then the body's ids) and makes
// the request's affinity key. The session id itself is kept nowhere: only
// its hash, and the 64-bit affinity key.
func (x *exchange) sessionOf(r *http.Request) {
	if x.st == wire.Gemini || x.key == nil {
		return
	}
	id := session.ID(r.Header, x.info.PromptCacheKey, x.info.MetadataUserID)
	x.aff.session = session.Hash(x.key.ID, id)
	sys, tools, first := x.info.Parts(x.body.Raw)
	x.aff.key = session.KeyOf(x.key.ID, x.info.Model, id, session.HashPrompt(sys, tools, first))
}
