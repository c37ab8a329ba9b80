package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/handlers/httpkit"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/static"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// The dashboard: server-rendered pages under sessions (httpkit.SessionStore), guarded
// against cross-origin writes by http.CrossOriginProtection. Handlers have the
// uiHandler shape and return errors; uiServe maps them to an HTML error page.

// LangCookie remembers the language picked with ?lang=.
const LangCookie = "gatehouse_lang"

// uiState is the dashboard's share of the Server: assets, sessions, the sign-in
// throttle, the gate history behind the sparklines, and the CSRF guard.
type uiState struct {
	assets   *static.Assets
	sessions *httpkit.SessionStore
	throttle *httpkit.LoginThrottle
	history  *gateHistory
	csrf     *http.CrossOriginProtection
	// traffic caches the overview's request-log numbers (traffic.go).
	traffic trafficCache
	// throttledAudits spaces the audit rows of refused sign-ins (signin_audit.go).
	throttledAudits throttledAudits
}

// newUIState builds the dashboard's state. The assets are embedded in the binary,
// so static.New fails only on a corrupt build: that panics.
func newUIState(st *store.Store, secure bool, now func() time.Time) *uiState {
	assets, err := static.New()
	if err != nil {
		panic(fmt.Sprintf("handlers: embedded static assets: %v", err))
	}
	return &uiState{
		assets:   assets,
		sessions: httpkit.NewSessionStore(st, secure, now),
		throttle: httpkit.NewLoginThrottle(now),
		history:  newGateHistory(historyEvery, historyKeep),
		csrf:     http.NewCrossOriginProtection(),
	}
}

// Request is what a dashboard handler knows about its request.
type uiRequest struct {
	sess *httpkit.SessionState
	// user is the signed-in user, loaded fresh on every request so a role change
	// or a removal applies at once; nil when signed out.
	user *store.User
	l    *web.Localizer
	now  time.Time
}

// uiHandler is a dashboard handler. A returned error becomes an error page.
type uiHandler func(w http.ResponseWriter, r *http.Request, rq *uiRequest) error

// Access says who may call a dashboard route.
type Access int

const (
	Public Access = iota // anyone (the sign-in page)
	Read                 // any signed-in user
	Write                // admins only
	Self                 // any signed-in user, writing only their own account
)

// uiStatus is an error that shows as an error page with a status and a catalog
// message (and is not logged).
type uiStatus struct {
	status int
	key    string // catalog key of the message
}

func (e *uiStatus) Error() string { return fmt.Sprintf("handlers: dashboard: %d %s", e.status, e.key) }

var (
	errUIForbidden   = &uiStatus{http.StatusForbidden, "error.forbidden"}
	errUIAdminOnly   = &uiStatus{http.StatusForbidden, "error.adminOnly"}
	errUICrossOrigin = &uiStatus{http.StatusForbidden, "error.crossOrigin"}
	errUINotFound    = &uiStatus{http.StatusNotFound, "error.notFound"}
	errUIBadForm     = &uiStatus{http.StatusBadRequest, "status.400"}
)

// Serve wraps h as a dashboard route: cross-origin writes refused (403), a bounded
// body, the language, the session and its user, then the access check.
func (s *Server) Serve(access Access, h uiHandler) http.Handler {
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, httpkit.MaxBodyBytes)
		setPageHeaders(w.Header())
		rq := &uiRequest{now: s.now(), l: s.uiLocalizer(w, r)}
		sess, err := s.dash.sessions.Load(r)
		if err != nil {
			s.uiFail(w, r, rq, err)
			return
		}
		rq.sess = sess
		if err := s.uiLoadUser(r, rq); err != nil {
			s.uiFail(w, r, rq, err)
			return
		}
		switch {
		case access == Public:
		case rq.user == nil && strings.Contains(r.Header.Get("Accept"), "application/json"):
			// The live poll of a page whose session ended (signed out in another
			// tab): 401, so the page can say so, not a redirect to a sign-in form.
			_ = httpkit.WriteJSON(w, http.StatusUnauthorized, map[string]string{"error": "signed out"}, "")
			return
		case rq.user == nil:
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		case access == Self:
			// A viewer may change their own password (and nothing else).
		case access == Write && rq.user.Role != store.RoleAdmin:
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				s.uiFail(w, r, rq, errUIAdminOnly) // an admin's page, not a write
			} else {
				s.uiFail(w, r, rq, errUIForbidden)
			}
			return
		case r.Method != http.MethodGet && r.Method != http.MethodHead && rq.user.Role != store.RoleAdmin:
			// Defence in depth: every write route is Write, but a viewer's POST
			// must never reach a handler even if one is listed wrongly.
			s.uiFail(w, r, rq, errUIForbidden)
			return
		}
		if err := h(w, r, rq); err != nil {
			s.uiFail(w, r, rq, err)
		}
	})
	return static.Compressed(s.dash.csrf.Handler(inner))
}

// uiCSRFDenied renders the page a cross-origin write gets (403), saying why: the
// user's role is not the reason.
func (s *Server) uiCSRFDenied(w http.ResponseWriter, r *http.Request) {
	l := s.uiLocalizer(w, r)
	rq := &uiRequest{now: s.now(), l: l}
	s.uiFail(w, r, rq, errUICrossOrigin)
}

// uiLocalizer picks the language: ?lang= (remembered in a cookie), else the cookie,
// else Accept-Language.
func (s *Server) uiLocalizer(w http.ResponseWriter, r *http.Request) *web.Localizer {
	cookie := ""
	if c, err := r.Cookie(LangCookie); err == nil {
		cookie = c.Value
	}
	if lang := r.URL.Query().Get("lang"); lang != "" && slices.Contains(web.Locales(), lang) {
		cookie = lang
		http.SetCookie(w, &http.Cookie{
			Name: LangCookie, Value: lang, Path: "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: s.deps.SecureCookies || httpkit.OverTLS(r), SameSite: http.SameSiteLaxMode,
		})
	}
	return web.NewLocalizer(web.MatchLocale(r.Header.Get("Accept-Language"), cookie))
}

// uiLoadUser loads the session's user; a session whose user is gone is emptied.
func (s *Server) uiLoadUser(r *http.Request, rq *uiRequest) error {
	uid := rq.sess.UserID()
	if uid == "" {
		return nil
	}
	u, err := s.store.GetUser(r.Context(), uid)
	if errors.Is(err, store.ErrNotFound) {
		rq.sess.SignOut()
		return nil
	}
	if err != nil {
		return err
	}
	rq.user = &u
	rq.sess.Touch(rq.now)
	return nil
}

// page returns the chrome of a page, taking the session's flashes.
func (s *Server) uiPage(r *http.Request, rq *uiRequest) web.Page {
	p := web.Page{
		L:        rq.l,
		CSSPath:  s.dash.assets.Path("app.css"),
		JSPath:   s.dash.assets.Path("app.js"),
		IconPath: s.dash.assets.Path("favicon.svg"),
		Now:      rq.now,
		Path:     r.URL.Path,
	}
	if rq.user != nil {
		p.User = &web.User{Email: rq.user.Email, Role: rq.user.Role}
	}
	if rq.sess != nil {
		p.Flashes = rq.sess.TakeFlashes()
	}
	return p
}

// uiRender renders a page component to a buffer, saves the session (flashes
// taken, expiry slid) and writes the page with status.
func (s *Server) uiRender(w http.ResponseWriter, r *http.Request, rq *uiRequest, status int, c templ.Component) error {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		return fmt.Errorf("handlers: render %s: %w", r.URL.Path, err)
	}
	if rq.sess != nil {
		if err := s.dash.sessions.Write(r, w, rq.sess); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, err := buf.WriteTo(w)
	if err != nil {
		s.log.DebugContext(r.Context(), "dashboard: write page", slog.Any("error", err))
	}
	return nil
}

// uiRedirect saves the session (with any flash just added) and redirects with 303.
func (s *Server) uiRedirect(w http.ResponseWriter, r *http.Request, rq *uiRequest, to string) error {
	if err := s.dash.sessions.Write(r, w, rq.sess); err != nil {
		return err
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// uiFlash adds a flash for the next page and redirects there.
func (s *Server) uiFlash(w http.ResponseWriter, r *http.Request, rq *uiRequest, kind, msg, to string) error {
	rq.sess.AddFlash(web.Flash{Kind: kind, Message: msg})
	return s.uiRedirect(w, r, rq, to)
}

// uiFail maps err to an error page: uiStatus errors as they say, ErrNotFound as
// 404, a body that did not arrive in time as 408, ErrUnavailable as 503 with Retry-After (as the API does, see problemFor)
// and a page saying the database is away, anything else as 500; the 503 and the
// 500 are logged once.
func (s *Server) uiFail(w http.ResponseWriter, r *http.Request, rq *uiRequest, err error) {
	status, key := http.StatusInternalServerError, "error.internal"
	var st *uiStatus
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &st):
		status, key = st.status, st.key
	case errors.Is(err, store.ErrNotFound):
		status, key = http.StatusNotFound, "error.notFound"
	case errors.As(err, &mbe):
		status, key = http.StatusRequestEntityTooLarge, "status.other"
	case httpkit.IsBodyTimeout(err):
		status, key = http.StatusRequestTimeout, "status.other"
	case errors.Is(err, store.ErrUnavailable):
		// The gateway keeps serving on its last config; the dashboard waits for the database.
		status, key = http.StatusServiceUnavailable, "error.unavailable"
		w.Header().Set("Retry-After", httpkit.RetryAfterUnavailable)
		s.log.WarnContext(r.Context(), "dashboard request failed: database unavailable",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
	default:
		s.log.ErrorContext(r.Context(), "dashboard request failed", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("client", s.ClientAddr(r)), slog.Any("error", err))
	}
	p := web.Page{
		L: rq.l, CSSPath: s.dash.assets.Path("app.css"), JSPath: s.dash.assets.Path("app.js"),
		IconPath: s.dash.assets.Path("favicon.svg"), Now: rq.now, Path: r.URL.Path,
	}
	if rq.user != nil {
		p.User = &web.User{Email: rq.user.Email, Role: rq.user.Role}
	}
	var buf bytes.Buffer
	// Not r.Context(): net/http cancels it when a body read fails, and the page is
	// still owed (a 408 after a body that did not arrive in time).
	if rerr := web.ErrorPage(p, status, rq.l.T(key)).Render(context.WithoutCancel(r.Context()), &buf); rerr != nil {
		s.log.ErrorContext(r.Context(), "dashboard: render error page", slog.Any("error", rerr))
		http.Error(w, http.StatusText(status), status)
		return
	}
	setPageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// contentSecurityPolicy is every dashboard page's CSP (DESIGN.md, "Dashboard"): only
// Gatehouse's own script, stylesheet and images (static/, content-hashed URLs) — no
// inline script, no style attribute — no framing, forms posting only here.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// setPageHeaders sets the headers of every dashboard page, error pages included.
func setPageHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("Referrer-Policy", "same-origin")
}

// uiForm parses a POSTed form (urlencoded), bounded by the body limit.
func uiForm(r *http.Request) (url.Values, error) {
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || httpkit.IsBodyTimeout(err) {
			return nil, err
		}
		return nil, errUIBadForm
	}
	return r.PostForm, nil
}

// localPath returns next when it is a path on this site ("/connections?x=1"), else
// "/": a sign-in link must never send anyone elsewhere.
func localPath(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.ContainsAny(next, "\\\r\n\t") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

// uiActor is how the audit log names a dashboard user: "user:<email>", beside the
// API's "token:<name>" and the CLI's "system" (docs/ARCHITECTURE.md, openapi.yaml).
func uiActor(rq *uiRequest) string { return web.ActorUserPrefix + rq.user.Email }

// NotFound serves every path no other route takes: the dashboard's 404 page, in
// its layout.
func (s *Server) NotFound(http.ResponseWriter, *http.Request, *uiRequest) error {
	return errUINotFound
}
