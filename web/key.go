package web

import (
	"net/url"
	"time"
)

// KeyItem is one client key or API token in a list. Secrets are never listed: only
// their preview.
type KeyItem struct {
	ID         string
	Name       string
	Preview    string // e.g. "gh_…9f2c"
	Role       string // API tokens only: RoleAdmin or RoleViewer
	CreatedAt  time.Time
	LastUsedAt time.Time // zero = never used
}

// CreatedSecret is a secret just created, shown once on the page after creation.
type CreatedSecret struct {
	Name   string
	Secret string
}

// KeyList is the view model of the client keys page and of the API tokens page.
type KeyList struct {
	Items []KeyItem
	// Created, when set, shows the new secret once (data-testid="new-secret").
	Created *CreatedSecret
	// Name and Role are what was typed in the create form (Role: tokens only).
	Name   string
	Role   string
	Errors FieldErrors
}

// revokeURL is the confirmation page for revoking one key or token:
// "/keys/{id}/revoke" or "/tokens/{id}/revoke".
func revokeURL(base, id string) string { return base + "/" + url.PathEscape(id) + "/revoke" }

func keyKind(tokens bool) string {
	if tokens {
		return "tokens"
	}
	return "keys"
}
