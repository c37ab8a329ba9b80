package ui

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// LoginForm serves GET /login. A signed-in user goes straight on.
func (s *Server) LoginForm(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
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

// Login serves POST /login: throttled (httpkit/throttle.go: the failure is charged
// before the password is checked), then store.Authenticate (constant-time); a good
// password rotates the session id and binds it to the user.
func (s *Server) Login(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	form, err := uiForm(r)
	if err != nil {
		return err
	}
	email, password := form.Get("email"), form.Get("password")
	f := web.LoginForm{Email: email, Next: uiNext(form.Get("next"))}
	client := s.ClientAddr(r)
	keys := s.dash.throttle.Keys(email, client)
	retry, delay := s.dash.throttle.Begin(keys)
	if retry > 0 {
		s.log.DebugContext(r.Context(), "dashboard sign-in throttled", slog.String("client", client))
		if s.dash.throttledAudits.allow(client, rq.now) {
			s.auditSignIn(r.Context(), store.ActionSignInThrottled, email, "", client)
		}
		f.Throttled, f.RetryAfterSeconds = true, retryAfterSeconds(w, retry)
		return s.uiRender(w, r, rq, http.StatusTooManyRequests, web.LoginPage(s.uiPage(r, rq), f))
	}
	if err := s.dash.throttle.Sleep(r.Context(), delay); err != nil {
		return nil // the client left during the delay; its attempt stays charged
	}
	u, err := s.store.Authenticate(r.Context(), email, password)
	if errors.Is(err, store.ErrInvalidCredentials) {
		s.log.InfoContext(r.Context(), "dashboard sign-in failed", slog.String("client", client))
		s.auditSignIn(r.Context(), store.ActionSignInFailed, email, "", client)
		if !utf8.ValidString(email) || strings.ContainsFunc(email, unicode.IsControl) {
			f.Email = "" // not shown back: no account has such an address
		}
		f.Error = rq.l.T("login.failed")
		return s.uiRender(w, r, rq, http.StatusUnauthorized, web.LoginPage(s.uiPage(r, rq), f))
	}
	if err != nil && r.Context().Err() != nil {
		return nil // the client left while waiting for a password hash slot; its attempt stays charged
	}
	if err != nil {
		s.dash.throttle.Refund(keys)
		return err
	}
	s.dash.throttle.Succeeded(keys)
	if err := s.dash.sessions.SignIn(r, rq.sess, u.ID, rq.now); err != nil {
		return err
	}
	s.auditSignIn(r.Context(), store.ActionSignIn, u.Email, u.ID, client)
	return s.uiRedirect(w, r, rq, localPath(f.Next))
}

// retryAfterSeconds sets Retry-After for a throttled answer and returns its seconds.
func retryAfterSeconds(w http.ResponseWriter, wait time.Duration) int {
	secs := max(int((wait+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	return secs
}

// Logout serves POST /logout (CSRF-guarded like every dashboard write): the
// session row is deleted and the cookie cleared.
func (s *Server) Logout(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	rq.sess.End()
	return s.uiRedirect(w, r, rq, "/login?signedout=1")
}

// LogoutPage serves GET /logout: a page with the sign-out button. A GET changes
// nothing, so no link or page of another site can sign anyone out.
func (s *Server) LogoutPage(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	if rq.user == nil {
		return s.uiRedirect(w, r, rq, "/login")
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.LogoutPage(s.uiPage(r, rq)))
}

// uiNext keeps a local return path for the sign-in form ("" for the overview).
func uiNext(next string) string {
	if p := localPath(next); p != "/" {
		return p
	}
	return ""
}
