package web

// CacheRow is one client key's, connection's or model's prompt-cache use
// over a time range: input tokens (every prompt token processed), the part
// read from the cache and the part written to it.
type CacheRow struct {
	// Group is "key", "connection" or "model"; ID the key's or connection's
	// id ("" for models); Name what the row is called ("" for no model).
	Group, ID, Name    string
	Input, Read, Write int64
}

// HitRatio is the share of the row's input read from the cache.
func (r CacheRow) HitRatio() float64 { return ratio(r.Read, r.Input) }

// CacheView is the prompt-cache table of the overview and /usage: its rows,
// keys first, then connections, then models, each by name.
type CacheView struct {
	// Range names the time range in words ("last 24 hours").
	Range string
	Rows  []CacheRow
}

// href is where a row leads: its requests (keys, connections) or none.
func (r CacheRow) href() string {
	switch {
	case r.ID == "":
		return ""
	case r.Group == "key":
		return RequestsURL("key", r.ID)
	default:
		return RequestsURL("connection", r.ID)
	}
}
