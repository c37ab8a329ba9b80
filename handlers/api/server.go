package api

import (
	"log/slog"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/go-playground/validator/v10"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Server serves the REST API's endpoints over the shared Core.
type Server struct {
	*httpkit.Core
	store    *store.Store
	log      *slog.Logger
	deps     httpkit.Deps
	now      func() time.Time
	validate *validator.Validate
}

// New returns the API's Server over core.
func New(core *httpkit.Core) *Server {
	d := core.Deps()
	return &Server{Core: core, store: d.Store, log: d.Logger, deps: d, now: d.Now, validate: core.Validator()}
}
