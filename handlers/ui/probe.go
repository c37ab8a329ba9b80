package ui

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// probeTimeout bounds a test request, its wait for admission included.
const probeTimeout = 30 * time.Second

// TestConnection serves POST /connections/{id}/test: one tiny request through the
// gateway to the connection, audited, answered with the connection's page and the
// result above the form (a plain form POST: no JavaScript needed).
func (s *Server) TestConnection(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	c, err := s.store.GetConnection(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	res := web.ProbeView{Refused: web.ProbeNotLoaded}
	if s.deps.Prober != nil {
		ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
		res, err = s.deps.Prober.Probe(ctx, c.ID)
		cancel()
		if err != nil {
			return err
		}
	}
	entry := store.ConnectionTest{Model: res.Model, Status: res.Status, Code: res.Code,
		LatencyMs: res.Latency.Milliseconds(), NotSent: res.Refused}
	if err := s.store.AuditConnectionTest(context.WithoutCancel(r.Context()), uiActor(rq), c.ID, entry); err != nil {
		// The test ran; a failed audit write is logged, the result still shown.
		s.log.WarnContext(r.Context(), "dashboard: audit a connection test", slog.String("connection", c.ID), slog.Any("error", err))
	}
	f, err := s.connectionForm(r.Context(), rq, &c, storedFields(c), nil)
	if err != nil {
		return err
	}
	f.Probe = &res
	f.Live = s.connectionLive(r, rq, c)
	return s.uiRender(w, r, rq, http.StatusOK, web.ConnectionFormPage(s.uiPage(r, rq), f))
}
