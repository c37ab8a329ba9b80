package handlers

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// uiLoginForm serves GET /login. A signed-in user goes straight on.
func (s *Server) uiLoginForm(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	next := r.URL.Query().Get("next")
	if rq.user != nil {
		return s.uiRedirect(w, r, rq, localPath(next))
	}
	page := s.uiPage(r, rq)
	if r.URL.Query().Has("signedout") {
		page.Flashes = append(page.Flashes, web.Flash{Kind: web.FlashInfo, Message: rq.l.T("login.signedOut")})
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.LoginPage(page, web.LoginForm{Next: uiNext(next)}))
}

// uiLogin serves POST /login: throttled, then store.Authenticate (constant-time);
// a good password rotates the session id and binds it to the user.
func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	form, err := uiForm(r)
	if err != nil {
		return err
	}
	email, password := form.Get("email"), form.Get("password")
	f := web.LoginForm{Email: email, Next: uiNext(form.Get("next"))}
	keys := attemptKeys(email, r)
	if wait := s.dash.throttle.wait(keys); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		f.Throttled, f.RetryAfterSeconds = true, secs
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		return s.uiRender(w, r, rq, http.StatusTooManyRequests, web.LoginPage(s.uiPage(r, rq), f))
	}
	u, err := s.store.Authenticate(r.Context(), email, password)
	if errors.Is(err, store.ErrInvalidCredentials) {
		s.dash.throttle.fail(keys)
		f.Error = rq.l.T("login.failed")
		return s.uiRender(w, r, rq, http.StatusUnauthorized, web.LoginPage(s.uiPage(r, rq), f))
	}
	if err != nil {
		return err
	}
	s.dash.throttle.succeed(keys)
	if err := s.dash.sessions.signIn(r, rq.sess, u.ID, rq.now); err != nil {
		return err
	}
	return s.uiRedirect(w, r, rq, localPath(f.Next))
}

// uiLogout serves POST /logout: the session row is deleted and the cookie cleared.
func (s *Server) uiLogout(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	rq.sess.end()
	return s.uiRedirect(w, r, rq, "/login?signedout=1")
}

// uiLogoutLink serves GET /logout, so a plain link or a typed URL signs out too. A
// navigation that another site started (Sec-Fetch-Site: cross-site) does not: it goes
// to the overview and the session stays, so no foreign page can sign anyone out.
func (s *Server) uiLogoutLink(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return s.uiRedirect(w, r, rq, "/")
	}
	return s.uiLogout(w, r, rq)
}

// uiNext keeps a local return path for the sign-in form ("" for the overview).
func uiNext(next string) string {
	if p := localPath(next); p != "/" {
		return p
	}
	return ""
}
