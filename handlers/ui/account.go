package ui

import (
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// Account serves GET /account: the signed-in user's own page.
func (s *Server) Account(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	return s.uiRender(w, r, rq, http.StatusOK, web.AccountPage(s.uiPage(r, rq), web.AccountForm{Email: rq.user.Email}))
}

// ChangePassword serves POST /account: any signed-in user (viewers too) changes
// their own password. The current password is checked as a sign-in is — throttled,
// the failure charged first — so a stolen session cannot guess it any faster than
// the sign-in form allows. On success every session of the user ends and this
// browser is signed in again under a new session id: only the other sessions are gone.
func (s *Server) ChangePassword(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	form, err := uiForm(r)
	if err != nil {
		return err
	}
	current, next, confirm := form.Get("currentPassword"), form.Get("newPassword"), form.Get("confirmPassword")
	v := web.AccountForm{Email: rq.user.Email, Errors: web.FieldErrors{}}
	if current == "" {
		v.Errors.Add("currentPassword", rq.l.T("validation.required"))
	}
	if utf8.RuneCountInString(next) < minPasswordLen {
		v.Errors.Add("newPassword", rq.l.T("validation.password"))
	} else if confirm != next {
		v.Errors.Add("confirmPassword", rq.l.T("validation.passwordMismatch"))
	}
	if v.Errors.Any() {
		return s.uiRender(w, r, rq, http.StatusUnprocessableEntity, web.AccountPage(s.uiPage(r, rq), v))
	}

	keys := s.dash.throttle.Keys(rq.user.Email, s.ClientAddr(r))
	retry, delay := s.dash.throttle.Begin(keys)
	if retry > 0 {
		secs := retryAfterSeconds(w, retry)
		v.Errors.Add("currentPassword", rq.l.T("login.throttled")+" "+rq.l.N("login.retryAfter", int64(secs)))
		return s.uiRender(w, r, rq, http.StatusTooManyRequests, web.AccountPage(s.uiPage(r, rq), v))
	}
	if err := s.dash.throttle.Sleep(r.Context(), delay); err != nil {
		return nil // the client left during the delay; its attempt stays charged
	}
	u, err := s.store.Authenticate(r.Context(), rq.user.Email, current)
	if errors.Is(err, store.ErrInvalidCredentials) || (err == nil && u.ID != rq.user.ID) {
		v.Errors.Add("currentPassword", rq.l.T("validation.currentPassword"))
		return s.uiRender(w, r, rq, http.StatusUnprocessableEntity, web.AccountPage(s.uiPage(r, rq), v))
	}
	if err != nil {
		s.dash.throttle.Refund(keys)
		return err
	}
	s.dash.throttle.Succeeded(keys)

	if err := s.store.SetPassword(r.Context(), uiActor(rq), rq.user.ID, next); err != nil {
		return err
	}
	if err := s.dash.sessions.SignIn(r, rq.sess, rq.user.ID, rq.now); err != nil {
		return err
	}
	return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.account.password"), "/account")
}
