package ui

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"
	"github.com/gatehouse-dev/gatehouse/handlers/ui/reports"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// Client keys (/keys) and API tokens (/tokens) share one page shape: a list, a
// create form that shows the new secret once (rendered in the POST's answer, never
// stored in the session), and a revoke confirmation.

// keyKind describes one of the two credential lists.
type keyKind struct {
	base    string // "/keys" or "/tokens"
	tokens  bool
	title   string // catalog key of the confirmation title
	body    string // catalog key of the confirmation message
	revoked string // catalog key of the flash
}

var (
	KindKeys = keyKind{
		base: "/keys", title: "confirm.key.title", body: "confirm.key.body", revoked: "flash.key.revoked",
	}
	KindTokens = keyKind{
		base: "/tokens", tokens: true, title: "confirm.token.title", body: "confirm.token.body", revoked: "flash.token.revoked",
	}
)

// keyItems lists the credentials of kind.
func (s *Server) keyItems(r *http.Request, kind keyKind) ([]web.KeyItem, error) {
	var items []web.KeyItem
	if kind.tokens {
		toks, err := s.store.ListAPITokens(r.Context())
		if err != nil {
			return nil, err
		}
		for _, t := range toks {
			items = append(items, web.KeyItem{ID: t.ID, Name: t.Name, Preview: t.Preview, Role: t.Role,
				CreatedAt: t.CreatedAt, LastUsedAt: derefTime(t.LastUsedAt)})
		}
		return items, nil
	}
	keys, err := s.store.ListClientKeys(r.Context())
	if err != nil {
		return nil, err
	}
	spend, err := s.store.ClientKeysSpend(r.Context(), s.now())
	if err != nil {
		return nil, err
	}
	load := live.ClientsByID(s.LiveSnapshot().Clients)
	now := s.now()
	cache := map[string]web.CacheRow{}
	if !s.deps.RequestLogOff {
		rows, err := reports.CacheRows(r.Context(), s.store, now.Add(-24*time.Hour), now, "key")
		if err != nil {
			return nil, err
		}
		for _, c := range rows {
			cache[c.ID] = c
		}
	}
	for _, k := range keys {
		lim, _ := limits.NormalizeClientKeyLimits(k.Limits)
		l, seen := load[k.ID]
		if !seen {
			// Not in the gateway's config yet (just created): nothing of it runs,
			// and its cap is the stored one.
			l = live.Client{ID: k.ID, Name: k.Name, Cap: lim.Effective().MaxConcurrent}
		}
		items = append(items, web.KeyItem{ID: k.ID, Name: k.Name, Preview: k.Preview,
			CreatedAt: k.CreatedAt, LastUsedAt: derefTime(k.LastUsedAt),
			Enabled: k.Enabled, Limits: lim, Live: l,
			SpentTodayMicros: spend[k.ID].TodayMicros, SpentMonthMicros: spend[k.ID].MonthMicros, Cache: cache[k.ID]})
	}
	return items, nil
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// renderKeys draws the list page of kind.
func (s *Server) renderKeys(w http.ResponseWriter, r *http.Request, rq *uiRequest, kind keyKind, status int, v web.KeyList) error {
	items, err := s.keyItems(r, kind)
	if err != nil {
		return err
	}
	v.Items = items
	page := s.uiPage(r, rq)
	if kind.tokens {
		return s.uiRender(w, r, rq, status, web.TokensPage(page, v))
	}
	v.LiveURL, v.LiveIntervalMs = "/live", liveInterval
	return s.uiRender(w, r, rq, status, web.KeysPage(page, v))
}

// Keys serves GET /keys and GET /tokens.
func (s *Server) Keys(kind keyKind) uiHandler {
	return func(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
		return s.renderKeys(w, r, rq, kind, http.StatusOK, web.KeyList{Role: store.RoleViewer})
	}
}

// CreateKey serves POST /keys and POST /tokens.
func (s *Server) CreateKey(kind keyKind) uiHandler {
	return func(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
		form, err := uiForm(r)
		if err != nil {
			return err
		}
		name := strings.TrimSpace(form.Get("name"))
		role := form.Get("role")
		v := web.KeyList{Name: name, Role: role, Errors: web.FieldErrors{}}
		switch {
		case kind.tokens && !httpkit.ValidLabel(name):
			v.Errors.Add("name", rq.l.T("validation.label"))
		case !kind.tokens && !httpkit.ValidConnName(name):
			// Client key names are unique and follow the connection-name rule.
			v.Errors.Add("name", rq.l.T("validation.connName"))
		}
		if kind.tokens && role != store.RoleAdmin && role != store.RoleViewer {
			v.Errors.Add("role", rq.l.T("validation.role"))
		}
		if v.Errors.Any() {
			return s.renderKeys(w, r, rq, kind, http.StatusUnprocessableEntity, v)
		}
		var secret string
		if kind.tokens {
			_, secret, err = s.store.CreateAPIToken(r.Context(), uiActor(rq), name, role)
		} else {
			_, secret, err = s.store.CreateClientKey(r.Context(), uiActor(rq), store.NewClientKeyInput(name))
		}
		if err != nil {
			return err
		}
		return s.renderKeys(w, r, rq, kind, http.StatusCreated, web.KeyList{
			Role: store.RoleViewer, Created: &web.CreatedSecret{Name: name, Secret: secret},
		})
	}
}

// findKey returns the credential id of kind, or errUINotFound.
func (s *Server) findKey(r *http.Request, kind keyKind, id string) (web.KeyItem, error) {
	items, err := s.keyItems(r, kind)
	if err != nil {
		return web.KeyItem{}, err
	}
	for _, it := range items {
		if it.ID == id {
			return it, nil
		}
	}
	return web.KeyItem{}, errUINotFound
}

// ConfirmRevoke serves GET /keys/{id}/revoke and GET /tokens/{id}/revoke.
func (s *Server) ConfirmRevoke(kind keyKind) uiHandler {
	return func(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
		it, err := s.findKey(r, kind, r.PathValue("id"))
		if err != nil {
			return err
		}
		return s.uiRender(w, r, rq, http.StatusOK, web.ConfirmDeletePage(s.uiPage(r, rq), web.ConfirmDelete{
			Title:     rq.l.T(kind.title, it.Name),
			Message:   rq.l.T(kind.body),
			Action:    kind.base + "/" + url.PathEscape(it.ID) + "/revoke",
			Button:    rq.l.T("action.revoke"),
			CancelURL: kind.base,
		}))
	}
}

// Revoke serves POST /keys/{id}/revoke and POST /tokens/{id}/revoke.
func (s *Server) Revoke(kind keyKind) uiHandler {
	return func(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
		it, err := s.findKey(r, kind, r.PathValue("id"))
		if err != nil {
			return err
		}
		if kind.tokens {
			err = s.store.DeleteAPIToken(r.Context(), uiActor(rq), it.ID)
		} else {
			err = s.store.DeleteClientKey(r.Context(), uiActor(rq), it.ID, 0)
		}
		if err != nil {
			return err
		}
		return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T(kind.revoked, it.Name), kind.base)
	}
}
