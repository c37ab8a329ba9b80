package gateway

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/usage"
)

// modelList is GET /v1/models of one config: the whole list rendered once,
// and each entry with the connections' (provider, upstream id) pairs it
// stands for, so a key with a models list is shown only what it may use.
type modelList struct {
	body    []byte                 // the whole list, for keys that may use every model
	byID    map[string]*modelEntry // GET /v1/models/{id}
	entries []*modelEntry          // sorted by id
}

type modelEntry struct {
	id    string
	obj   []byte // the entry's JSON object
	serve []servedModel
}

// servedModel is one connection's model behind an entry: what a key's models
// list is checked against.
type servedModel struct{ provider, model string }

// allowedBy reports whether the key may use the entry: some connection
// serving it is one the key's models list allows.
func (e *modelEntry) allowedBy(ks *keyState) bool {
	if ks == nil || ks.eff.Models.All() {
		return true
	}
	for _, sm := range e.serve {
		if ks.eff.Models.Allows(sm.provider, sm.model) {
			return true
		}
	}
	return false
}

// modelsList renders GET /v1/models: every model of every enabled
// connection, as its bare id and as provider/model, in the OpenAI list shape.
func modelsList(s *state) modelList {
	type entry struct {
		id, owner string
		serve     []servedModel
	}
	byID := make(map[string]*entry)
	var entries []*entry
	add := func(id, owner string, sm servedModel) {
		e := byID[id]
		if e == nil {
			e = &entry{id: id, owner: owner}
			byID[id] = e
			entries = append(entries, e)
		}
		if !slices.Contains(e.serve, sm) {
			e.serve = append(e.serve, sm)
		}
	}
	for _, c := range s.conns {
		if !c.enabled || !c.styleOK {
			continue
		}
		for _, m := range c.models {
			sm := servedModel{c.provider, m}
			add(m, c.provider, sm)
			if c.provider != "" {
				add(c.provider+"/"+m, c.provider, sm)
			}
		}
	}
	slices.SortFunc(entries, func(a, b *entry) int { return strings.Compare(a.id, b.id) })
	l := modelList{byID: make(map[string]*modelEntry, len(entries))}
	for _, e := range entries {
		obj := []byte(`{"id":`)
		obj = usage.AppendJSONString(obj, e.id)
		obj = append(obj, `,"object":"model","created":0,"owned_by":`...)
		obj = usage.AppendJSONString(obj, cmp.Or(e.owner, "gatehouse"))
		obj = append(obj, '}')
		me := &modelEntry{id: e.id, obj: obj, serve: e.serve}
		l.byID[e.id] = me
		l.entries = append(l.entries, me)
	}
	l.body = l.render(nil)
	return l
}

// render writes the list of the entries ks may use (all of them for nil).
func (l *modelList) render(ks *keyState) []byte {
	b := []byte(`{"object":"list","data":[`)
	n := 0
	for _, e := range l.entries {
		if !e.allowedBy(ks) {
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

// listModels answers GET /v1/models and /v1/models/{id} from s for key ks,
// returning errAnswered, or the error to send. A key with a models list sees
// only the models it may use; another is "not found" to it.
func listModels(w http.ResponseWriter, r *http.Request, s *state, ks *keyState, rt route) *apiError {
	body := s.models.body
	if ks != nil && !ks.eff.Models.All() {
		body = s.models.render(ks)
	}
	if rt == routeModel {
		id := strings.TrimPrefix(r.URL.Path, modelPrefix)
		e := s.models.byID[id]
		if e == nil || !e.allowedBy(ks) {
			return &apiError{status: http.StatusNotFound, code: CodeModelNotFound, message: "no enabled connection serves model " + quoteModel(id)}
		}
		body = e.obj
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
	return errAnswered
}
