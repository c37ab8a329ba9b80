package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/clientkey"
	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/route"
	"github.com/gatehouse-dev/gatehouse/gateway/wire"
)

// modelsList lists GET /v1/models: every model of every enabled connection,
// as its bare id and as provider/model.
func modelsList(s *state) wire.ModelList {
	var models []wire.ServedModel
	for _, c := range s.conns {
		if !c.enabled || !c.styleOK {
			continue
		}
		for _, m := range c.models {
			sm := wire.Served{Provider: c.provider, Model: m}
			models = append(models, wire.ServedModel{ID: m, Owner: c.provider, Served: sm})
			if c.provider != "" {
				models = append(models, wire.ServedModel{ID: c.provider + "/" + m, Owner: c.provider, Served: sm})
			}
		}
	}
	return wire.NewModelList(models)
}

// listModels answers GET /v1/models and /v1/models/{id} from s for key ks,
// returning errAnswered, or the error to send. A key with a models list sees
// only the models it may use; another is "not found" to it.
func listModels(w http.ResponseWriter, r *http.Request, s *state, ks *clientkey.State, rt route.Route) *apiError {
	var allow limits.ModelAllowlist // nil key: every model
	if ks != nil {
		allow = ks.Eff.Models
	}
	var body []byte
	if rt == route.Model {
		id := strings.TrimPrefix(r.URL.Path, route.ModelPrefix)
		obj, ok := s.models.Entry(id, allow)
		if !ok {
			return &apiError{Status: http.StatusNotFound, Code: CodeModelNotFound, Message: "no enabled connection serves model " + quoteModel(id)}
		}
		body = obj
	} else {
		body = s.models.Render(allow)
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
