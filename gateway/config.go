package gateway

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/admission"
	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/gates"
	"github.com/gatehouse-dev/gatehouse/gateway/health"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/metrics"
	"github.com/gatehouse-dev/gatehouse/gateway/ratelimit"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// Config is one immutable snapshot of everything the gateway routes by: the
// global settings row and every provider connection. cmd builds it from the
// store and hands it to Apply.
type Config struct {
	Settings    limits.Settings
	Connections []Connection
	// ClientKeys are every client key, with its own limits: the key gates'
	// caps, the key rates and the live view's clients come from here.
	ClientKeys []ClientKey
}

// Connection is one upstream account as the gateway needs it. APIKey is the
// decrypted upstream secret; the gateway never logs it.
type Connection struct {
	ID       string
	Name     string
	Provider string // lower-case provider key, e.g. "zai"
	APIStyle string // "openai", "anthropic" or "gemini"
	// BaseURL includes the upstream's version prefix: a client's
	// POST /v1/chat/completions goes to BaseURL + "/chat/completions".
	BaseURL   string
	APIKey    string
	Models    []string // upstream model ids
	Priority  int      // higher is tried first
	Enabled   bool
	Overrides limits.Overrides
}

// conn is a Connection prepared for the hot path.
type conn struct {
	id, name, provider string
	label              string   // X-Gatehouse-Connection
	labelHdr           []string // {label}, shared by every response (len == cap, so never appended to in place)
	style              wire.Style
	styleOK            bool // APIStyle is one we know
	enabled            bool
	priority           int
	models             []string
	base               url.URL // BaseURL, parsed
	urls               [route.Num]url.URL
	authHeader         string // canonical header name carrying the upstream key
	authValue          []string
	maxWait            time.Duration
	queueDepth         int
	execBound          time.Duration
	gateKey            string // connection:<id>
	health             *health.Conn
	lim                ratelimit.Limits
	rate               *ratelimit.State // set by Apply
	durObs             interface{ Observe(float64) }
	// affinity: the connection takes affinity bindings (override affinity);
	// drainAt is the used fraction of a usage window at which it stops
	// (override drainAtPercent).
	affinity bool
	drainAt  float64
	// placing counts the requests in flight here that will bind a session
	// to it (no binding yet, or one elsewhere): placeNew counts them with
	// the sessions bound, so that sessions starting together spread before
	// their first answers write their bindings.
	placing atomic.Int32
}

// target is one way to serve a requested model: a connection and the
// upstream model id to send it.
type target struct {
	c     *conn
	model string
	req   admission.Request // the gate path; read-only once built
	stats *metrics.Target
	// learn is the adaptive gates on the path (package health), empty unless
	// the connection is adaptive; shadow its shadow gates.
	learn  health.LearnPath
	shadow health.ShadowPath
	// rate is the model's price (settings prices), for the request's cost.
	rate limits.Rate
	// urls are a gemini connection's URLs for this model (the model is in
	// the path), by route; nil for the other styles, whose URLs are the
	// connection's.
	urls *[route.Num]url.URL
}

// state is the immutable routing snapshot built by Apply.
type state struct {
	loadedAt time.Time
	eff      limits.EffectiveSettings
	conns    []*conn // config order, disabled included
	byID     map[string]*conn
	routes   [wire.NumStyles]map[string][]*target // by style, then upstream model name (bare or provider/model)
	// geminiModels is what GET /v1beta/models may list (gemini.go).
	geminiModels []geminiModelEntry
	models       wire.ModelList // GET /v1/models and /v1/models/{id}
	caps         map[string]int
	maxAttempts  int
	keys         map[string]*clientkey.State // client keys by id
	keyOrder     []*clientkey.State          // client keys in config order
}

// provider is the provider of configured connection id (gates.Identity's
// lookup); s may be nil.
func (s *state) provider(id string) (string, bool) {
	if s == nil || s.byID[id] == nil {
		return "", false
	}
	return s.byID[id].provider, true
}

// buildState prepares cfg for routing. Connections with a base URL that does
// not parse, or an unknown API style, are kept (their gates are shown) but
// never routed to; the problems are returned as warnings.
func (g *Gateway) buildState(cfg Config, now time.Time) (*state, []string) {
	eff := cfg.Settings.Effective()
	s := &state{
		loadedAt:    now,
		eff:         eff,
		byID:        make(map[string]*conn, len(cfg.Connections)),
		maxAttempts: max(eff.MaxAttempts, 1),
	}
	var all []*target
	for st := range wire.NumStyles {
		s.routes[st] = make(map[string][]*target)
	}
	var warnings []string
	spec := gates.NewSpec(eff)
	for _, cc := range cfg.Connections {
		if cc.ID == "" || s.byID[cc.ID] != nil {
			warnings = append(warnings, "connection with an empty or repeated id skipped: "+cc.Name)
			continue
		}
		c := g.prepareConn(cc, eff, &warnings)
		s.conns = append(s.conns, c)
		s.byID[c.id] = c
		spec.AddConnection(c.id, cc.Overrides)
		if !c.enabled || !c.styleOK {
			continue
		}
		// Bare ids first, so an upstream id that itself looks like
		// "provider/model" wins over an alias of the same spelling.
		byName := s.routes[c.style]
		ts := make([]*target, 0, len(cc.Models))
		for _, m := range cc.Models {
			if m == "" {
				continue
			}
			t := g.newTarget(c, m)
			t.rate = eff.Prices.Lookup(c.provider, m)
			ts = append(ts, t)
			all = append(all, t)
			addTarget(byName, m, t)
		}
		if c.provider != "" {
			for _, t := range ts {
				addTarget(byName, c.provider+"/"+t.model, t)
			}
		}
	}
	s.caps = spec.Caps
	learned := g.learn.Configure(spec.Learn)
	shadowed := g.shadows.Configure(spec.Shadow, now)
	for _, t := range all {
		for _, key := range []string{t.c.gateKey, gates.Model(t.c.id, t.model)} {
			if lg := learned[key]; lg != nil {
				t.learn = append(t.learn, lg)
			}
		}
		for _, key := range []string{gates.ShadowConnection(t.c.id), gates.ShadowModel(t.c.id, t.model)} {
			if sg := shadowed[key]; sg != nil {
				t.shadow = append(t.shadow, sg)
			}
		}
	}
	for _, byName := range s.routes {
		for name, ts := range byName {
			// Highest priority first; config order breaks ties so the
			// rotation among equals is stable.
			slices.SortStableFunc(ts, func(a, b *target) int { return cmp.Compare(b.c.priority, a.c.priority) })
			byName[name] = ts
		}
	}
	s.models = modelsList(s)
	s.geminiModels = geminiModelEntries(s)
	return s, warnings
}

// addTarget adds t under name unless the connection is already there: a
// bare id and an alias can name the same connection.
func addTarget(byName map[string][]*target, name string, t *target) {
	for _, have := range byName[name] {
		if have.c == t.c {
			return
		}
	}
	byName[name] = append(byName[name], t)
}

func (g *Gateway) prepareConn(cc Connection, eff limits.EffectiveSettings, warnings *[]string) *conn {
	c := &conn{
		id:       cc.ID,
		name:     cc.Name,
		provider: cc.Provider,
		label:    cmp.Or(cc.Name, cc.ID),
		enabled:  cc.Enabled,
		priority: cc.Priority,
		models:   slices.Clone(cc.Models),
		gateKey:  gates.Connection(cc.ID),
	}
	switch strings.ToLower(cc.APIStyle) {
	case "openai", "":
		c.style, c.styleOK = wire.OpenAI, true
	case "anthropic":
		c.style, c.styleOK = wire.Anthropic, true
	case "gemini":
		c.style, c.styleOK = wire.Gemini, true
	default:
		*warnings = append(*warnings, "connection "+c.label+": unknown apiStyle "+cc.APIStyle)
	}
	base, err := url.Parse(strings.TrimRight(cc.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		*warnings = append(*warnings, "connection "+c.label+": base URL is not an absolute http(s) URL")
		c.styleOK = false
	} else {
		c.base = *base
		for r := range route.Num {
			u := *base
			u.Path = base.Path + route.Suffix[r]
			u.RawPath = ""
			c.urls[r] = u
		}
	}
	switch c.style {
	case wire.Anthropic:
		c.authHeader, c.authValue = "X-Api-Key", []string{cc.APIKey}
	case wire.Gemini:
		c.authHeader, c.authValue = "X-Goog-Api-Key", []string{cc.APIKey}
	default:
		c.authHeader, c.authValue = "Authorization", []string{"Bearer " + cc.APIKey}
	}
	o := cc.Overrides
	bounds := eff.Bounds(cc.Provider, o)
	c.maxWait, c.queueDepth, c.execBound = bounds.MaxWait, bounds.MaxQueueDepth, bounds.Execution
	c.lim = ratelimit.ForConnection(cc.ID, o)
	c.affinity, c.drainAt = o.AffinityOn(), o.DrainAt()
	c.labelHdr = []string{c.label}
	c.durObs = g.metrics.UpstreamDuration.WithLabelValues(c.label)
	return c
}

func (g *Gateway) newTarget(c *conn, model string) *target {
	t := &target{
		c:     c,
		model: model,
		req: admission.Prepare(admission.Request{
			Gates:         gates.Path(c.provider, c.id, model),
			MaxWait:       c.maxWait,
			QueueKey:      c.gateKey,
			MaxQueueDepth: c.queueDepth,
		}),
		stats: g.metrics.Target(c.label, model),
	}
	if c.style == wire.Gemini {
		t.urls = geminiTargetURLs(c, model)
	}
	return t
}
