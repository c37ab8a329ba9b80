package wire

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// ModelList is GET /v1/models of one config: the whole list rendered once,
// and each entry with the connections' (provider, upstream id) pairs it
// stands for, so a key with a models list is shown only what it may use.
type ModelList struct {
	body    []byte                 // the whole list, for keys that may use every model
	byID    map[string]*ModelEntry // GET /v1/models/{id}
	entries []*ModelEntry          // sorted by id
}

// ModelEntry is one model of a ModelList.
type ModelEntry struct {
	id    string
	obj   []byte // the entry's JSON object
	serve []Served
}

// Served is one connection's model behind an entry: what a key's models
// list is checked against.
type Served struct{ Provider, Model string }

// ServedModel is one model a connection serves, as NewModelList takes it.
type ServedModel struct {
	ID    string // as listed: the bare id, or provider/model
	Owner string // owned_by; "" = "gatehouse"
	Served
}

// NewModelList renders the OpenAI list of models in the order and with the
// duplicates they come in: one entry per id, standing for every connection
// model listed under it.
func NewModelList(models []ServedModel) ModelList {
	var entries []*ModelEntry
	byID := make(map[string]*ModelEntry)
	for _, m := range models {
		e := byID[m.ID]
		if e == nil {
			obj := []byte(`{"id":`)
			obj = usage.AppendJSONString(obj, m.ID)
			obj = append(obj, `,"object":"model","created":0,"owned_by":`...)
			obj = usage.AppendJSONString(obj, cmp.Or(m.Owner, "gatehouse"))
			e = &ModelEntry{id: m.ID, obj: append(obj, '}')}
			byID[m.ID] = e
			entries = append(entries, e)
		}
		if !slices.Contains(e.serve, m.Served) {
			e.serve = append(e.serve, m.Served)
		}
	}
	slices.SortFunc(entries, func(a, b *ModelEntry) int { return strings.Compare(a.id, b.id) })
	l := ModelList{byID: byID, entries: entries}
	l.body = l.Render(limits.ModelAllowlist{})
	return l
}

// allowedBy reports whether a key with models list a may use the entry:
// some connection serving it is one a allows.
func (e *ModelEntry) allowedBy(a limits.ModelAllowlist) bool {
	if a.All() {
		return true
	}
	for _, sm := range e.serve {
		if a.Allows(sm.Provider, sm.Model) {
			return true
		}
	}
	return false
}

// Render writes the list of the entries a key with models list a may use.
func (l *ModelList) Render(a limits.ModelAllowlist) []byte {
	if a.All() && l.body != nil {
		return l.body
	}
	b := []byte(`{"object":"list","data":[`)
	n := 0
	for _, e := range l.entries {
		if !e.allowedBy(a) {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, e.obj...)
		n++
	}
	return append(b, "]}"...)
}

// Entry returns the JSON object of model id, if a key with models list a may
// use it.
func (l *ModelList) Entry(id string, a limits.ModelAllowlist) ([]byte, bool) {
	e := l.byID[id]
	if e == nil || !e.allowedBy(a) {
		return nil, false
	}
	return e.obj, true
}
