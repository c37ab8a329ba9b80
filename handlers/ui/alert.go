package ui

import (
	"net/http"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/web"
)

// Alerts serves GET /alerts (viewer or admin): the webhooks and the
// recent deliveries, refreshed from /alerts/live.
func (s *Server) Alerts(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	v, err := s.alertList(r)
	if err != nil {
		return err
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.AlertsPage(s.uiPage(r, rq), v))
}

// AlertsLive serves GET /alerts/live: the deliveries' rows as the
// fragment "alerts" of the live refresh.
func (s *Server) AlertsLive(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	v, err := s.alertList(r)
	if err != nil {
		return err
	}
	if err := s.dash.sessions.Write(r, w, rq.sess); err != nil {
		return err
	}
	f, err := s.renderFragments(r.Context(), map[string]templ.Component{"alerts": web.AlertRows(s.uiPage(r, rq), v)})
	if err != nil {
		return err
	}
	return httpkit.WriteJSON(w, http.StatusOK, LiveView{Fragments: f}, "")
}

func (s *Server) alertList(r *http.Request) (web.AlertList, error) {
	st, err := s.AlertsState(r.Context())
	if err != nil {
		return web.AlertList{}, err
	}
	v := web.AlertList{CooldownMs: st.AlertCooldownMs, LiveURL: "/alerts/live", LiveIntervalMs: liveInterval}
	for _, h := range st.Webhooks {
		v.Webhooks = append(v.Webhooks, web.AlertWebhook{Name: h.Name, URL: h.URL, Format: h.Format, Events: h.Events, Signed: h.SecretSet})
	}
	for _, d := range st.Deliveries {
		v.Deliveries = append(v.Deliveries, web.AlertDelivery{Event: d.Event, Subject: d.Subject, Webhook: d.Webhook,
			Status: d.Status, Summary: d.Summary, LastError: d.LastError, Tries: d.Tries, At: d.CreatedAt})
	}
	return v, nil
}

// errUIWebhookUnknown answers a test of a webhook the settings do not have.
var errUIWebhookUnknown = &uiStatus{http.StatusNotFound, "error.notFound"}

// TestAlert serves POST /alerts/{webhook}/test (admin): a test alert,
// sent off the request; back to /alerts, where it shows as it is delivered.
func (s *Server) TestAlert(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	name := r.PathValue("webhook")
	if _, err := s.SendTestAlert(r.Context(), name, uiActor(rq)); err != nil {
		if err == httpkit.ErrNoWebhook {
			return errUIWebhookUnknown
		}
		return err
	}
	return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.alert.test", name), "/alerts")
}
