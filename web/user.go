package web

import (
	"net/url"
	"time"
)

// UserItem is one dashboard user in the users list.
type UserItem struct {
	ID        string
	Email     string
	Role      string // RoleAdmin or RoleViewer
	CreatedAt time.Time
	// Self marks the signed-in admin, who cannot demote or remove themselves here.
	Self bool
}

// UserList is the users page's view model (admins only). Adding POSTs email, password
// and role to /users; a role change POSTs role to /users/{id}/role; a password reset
// POSTs password to /users/{id}/password; removing confirms on GET /users/{id}/delete.
type UserList struct {
	Items []UserItem
	// Email and Role are what was typed in the add form.
	Email  string
	Role   string
	Errors FieldErrors
	// ResetID and ResetErrors are a failed password reset of that user (POST
	// /users/{id}/password), shown beside that row's password field.
	ResetID     string
	ResetErrors []string
}

func userPath(id, suffix string) string { return "/users/" + url.PathEscape(id) + suffix }
