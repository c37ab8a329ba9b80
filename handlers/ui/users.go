package ui

import (
	"errors"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// minPasswordLen is the shortest password the dashboard accepts for a new user.
const minPasswordLen = 12

// renderUsers draws the users page (admins only).
func (s *Server) renderUsers(w http.ResponseWriter, r *http.Request, rq *uiRequest, status int, v web.UserList) error {
	users, err := s.store.ListUsers(r.Context())
	if err != nil {
		return err
	}
	for _, u := range users {
		v.Items = append(v.Items, web.UserItem{
			ID: u.ID, Email: u.Email, Role: u.Role, CreatedAt: u.CreatedAt, Self: u.ID == rq.user.ID,
		})
	}
	return s.uiRender(w, r, rq, status, web.UsersPage(s.uiPage(r, rq), v))
}

// Users serves GET /users.
func (s *Server) Users(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	return s.renderUsers(w, r, rq, http.StatusOK, web.UserList{Role: store.RoleViewer})
}

// AddUser serves POST /users.
func (s *Server) AddUser(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	form, err := uiForm(r)
	if err != nil {
		return err
	}
	email, password, role := strings.TrimSpace(form.Get("email")), form.Get("password"), form.Get("role")
	v := web.UserList{Email: email, Role: role, Errors: web.FieldErrors{}}
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email {
		v.Errors.Add("email", rq.l.T("validation.email"))
	}
	if utf8.RuneCountInString(password) < minPasswordLen {
		v.Errors.Add("password", rq.l.T("validation.password"))
	}
	if role != store.RoleAdmin && role != store.RoleViewer {
		v.Errors.Add("role", rq.l.T("validation.role"))
	}
	if !v.Errors.Any() {
		u, err := s.store.CreateUser(r.Context(), uiActor(rq), email, password, role)
		switch {
		case errors.Is(err, store.ErrConflict):
			v.Errors.Add("email", rq.l.T("validation.emailTaken"))
		case err != nil:
			return err
		default:
			return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.user.added", u.Email), "/users")
		}
	}
	return s.renderUsers(w, r, rq, http.StatusUnprocessableEntity, v)
}

// SetRole serves POST /users/{id}/role. Admins cannot change their own role here
// (so the last admin cannot lock everyone out by accident).
func (s *Server) SetRole(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	id := r.PathValue("id")
	form, err := uiForm(r)
	if err != nil {
		return err
	}
	role := form.Get("role")
	if role != store.RoleAdmin && role != store.RoleViewer {
		return errUIBadForm
	}
	if id == rq.user.ID {
		return s.uiFlash(w, r, rq, web.FlashError, rq.l.T("flash.user.self"), "/users")
	}
	u, err := s.store.SetRole(r.Context(), uiActor(rq), id, role)
	switch {
	case errors.Is(err, store.ErrConflict):
		return s.uiFlash(w, r, rq, web.FlashError, rq.l.T("flash.user.lastAdmin"), "/users")
	case err != nil:
		return err
	}
	return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.user.role", u.Email, rq.l.T("role."+u.Role)), "/users")
}

// ConfirmDeleteUser serves GET /users/{id}/delete.
func (s *Server) ConfirmDeleteUser(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	u, err := s.store.GetUser(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if u.ID == rq.user.ID {
		return s.uiFlash(w, r, rq, web.FlashError, rq.l.T("flash.user.self"), "/users")
	}
	return s.uiRender(w, r, rq, http.StatusOK, web.ConfirmDeletePage(s.uiPage(r, rq), web.ConfirmDelete{
		Title:     rq.l.T("confirm.user.title", u.Email),
		Message:   rq.l.T("confirm.user.body"),
		Action:    "/users/" + url.PathEscape(u.ID) + "/delete",
		Button:    rq.l.T("action.remove"),
		CancelURL: "/users",
	}))
}

// DeleteUser serves POST /users/{id}/delete; the user's sessions end with them.
func (s *Server) DeleteUser(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	u, err := s.store.GetUser(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if u.ID == rq.user.ID {
		return s.uiFlash(w, r, rq, web.FlashError, rq.l.T("flash.user.self"), "/users")
	}
	err = s.store.DeleteUser(r.Context(), uiActor(rq), u.ID)
	switch {
	case errors.Is(err, store.ErrConflict):
		return s.uiFlash(w, r, rq, web.FlashError, rq.l.T("flash.user.lastAdmin"), "/users")
	case err != nil:
		return err
	}
	return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.user.removed", u.Email), "/users")
}

// ResetPassword serves POST /users/{id}/password: an admin sets another user's
// password; every session of that user ends (store.SetPassword). Admins change their
// own on /account, where the current password is asked for.
func (s *Server) ResetPassword(w http.ResponseWriter, r *http.Request, rq *uiRequest) error {
	u, err := s.store.GetUser(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	form, err := uiForm(r)
	if err != nil {
		return err
	}
	if u.ID == rq.user.ID {
		return s.uiFlash(w, r, rq, web.FlashError, rq.l.T("flash.user.selfPassword"), "/account")
	}
	password := form.Get("password")
	if utf8.RuneCountInString(password) < minPasswordLen {
		v := web.UserList{Role: store.RoleViewer, ResetID: u.ID, ResetErrors: []string{rq.l.T("validation.password")}}
		return s.renderUsers(w, r, rq, http.StatusUnprocessableEntity, v)
	}
	if err := s.store.SetPassword(r.Context(), uiActor(rq), u.ID, password); err != nil {
		return err
	}
	return s.uiFlash(w, r, rq, web.FlashSuccess, rq.l.T("flash.user.password", u.Email), "/users")
}
