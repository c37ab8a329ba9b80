package web

import (
	"net/url"
	"slices"
	"strings"
	"time"
)

// Role names as the store and the API write them.
const (
	RoleAdmin  = "admin"
	RoleViewer = "viewer"
)

// Nav items, the values of Page.Nav.
const (
	NavOverview    = "overview"
	NavConnections = "connections"
	NavSettings    = "settings"
	NavKeys        = "keys"
	NavTokens      = "tokens"
	NavAudit       = "audit"
	NavRequests    = "requests"
	NavUsage       = "usage"
	NavUsers       = "users"
	NavAccount     = "account"
	NavSessions    = "sessions"
)

// Page is the chrome every dashboard page shares. Handlers fill it once per request
// (see NewPage); each page component sets Title and Nav itself.
type Page struct {
	// L translates and formats; nil means English.
	L *Localizer
	// User is the signed-in user; nil on the sign-in and error pages before sign-in.
	User *User
	// CSSPath, JSPath and IconPath are the content-hashed asset URLs from static.Assets.Path.
	CSSPath, JSPath, IconPath string
	// Flashes are one-shot messages carried over a redirect, already localised.
	Flashes []Flash
	// Now is the request time, used for "3 min ago" and countdowns; zero means time.Now().
	Now time.Time
	// Path is the request path (without query), used by the language switcher; "" means "/".
	Path string

	// Title and Nav are set by the page component, not by handlers.
	Title string
	Nav   string
}

// User is the signed-in dashboard user.
type User struct {
	Email string
	Role  string // RoleAdmin or RoleViewer
}

// IsAdmin reports whether the user may write.
func (u *User) IsAdmin() bool { return u != nil && u.Role == RoleAdmin }

// Flash kinds.
const (
	FlashSuccess = "success"
	FlashError   = "error"
	FlashInfo    = "info"
)

// Flash is a one-shot message shown at the top of the next page, e.g.
// {Kind: FlashSuccess, Message: l.T("flash.connection.saved", "zai-main", "glm-5 cap 1 → 2")}.
type Flash struct {
	Kind    string // FlashSuccess, FlashError or FlashInfo
	Message string // localised text
}

// with returns a copy of p with the title and nav item set.
func (p Page) with(title, nav string) Page {
	p.Title = title
	p.Nav = nav
	return p
}

// now returns Page.Now, or the wall clock when it is unset.
func (p Page) now() time.Time {
	if p.Now.IsZero() {
		return time.Now()
	}
	return p.Now
}

// admin reports whether the signed-in user may write.
func (p Page) admin() bool { return p.User.IsAdmin() }

// langURL is the current page's URL with ?lang=tag, the language switcher's target.
func (p Page) langURL(tag string) string {
	path := p.Path
	if path == "" || !strings.HasPrefix(path, "/") {
		path = "/"
	}
	return path + "?lang=" + url.QueryEscape(tag)
}

// FieldErrors holds validation messages per form field, keyed by the field's form name
// (the JSON name: "maxConcurrent", "modelConcurrency", "name"…). A field may have several
// messages (one per bad textarea line). Messages are shown as given: localise them first.
type FieldErrors map[string][]string

// Add appends msg to field's messages.
func (e FieldErrors) Add(field, msg string) { e[field] = append(e[field], msg) }

// AddPath adds msg under the form field that an API error path names:
// "rateLimitOverrides.modelConcurrency.glm-5" → "modelConcurrency",
// "rateLimitOverrides.maxWaitMs" → "maxWaitMs", "providers.zai.maxConcurrent" →
// "providers", "models[3]" → "models". See FormField.
func (e FieldErrors) AddPath(path, msg string) { e.Add(FormField(path), msg) }

// Get returns field's messages.
func (e FieldErrors) Get(field string) []string { return e[field] }

// Has reports whether field has any message.
func (e FieldErrors) Has(field string) bool { return len(e[field]) > 0 }

// Any reports whether any field has a message.
func (e FieldErrors) Any() bool {
	for _, m := range e {
		if len(m) > 0 {
			return true
		}
	}
	return false
}

// Except returns the messages of every field not in known, in field order: errors a
// form cannot place beside a field of its own, shown at its top instead.
func (e FieldErrors) Except(known []string) []string {
	keys := make([]string, 0, len(e))
	for k := range e {
		if !slices.Contains(known, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		for _, m := range e[k] {
			if k != "" {
				m = k + ": " + m
			}
			out = append(out, m)
		}
	}
	return out
}

// FormField maps an API error path onto the name of the form field that edits it: the
// "rateLimitOverrides." prefix (a connection's) or "limits." prefix (a client key's)
// is dropped and only the first remaining segment is kept (a map key or list index
// belongs to its field).
func FormField(path string) string {
	p := strings.TrimPrefix(strings.TrimPrefix(path, "rateLimitOverrides."), "limits.")
	// The shadow caps are two fields of their own, named by their dotted path.
	for _, f := range []string{"shadow.maxConcurrent", "shadow.modelConcurrency"} {
		if p == f || strings.HasPrefix(p, f+".") {
			return f
		}
	}
	if i := strings.IndexAny(p, ".["); i >= 0 {
		p = p[:i]
	}
	return p
}

// Conflict tells an editor that someone else saved first; the form shows it as a banner
// and keeps what the editor typed, unsaved.
type Conflict struct {
	By        string    // who saved first (email or token name)
	At        time.Time // when
	Version   int64     // the version now stored
	ReloadURL string    // where to load the current values, e.g. "/connections/{id}"
}

// Change is the "last changed" footer of an edit form.
type Change struct {
	By       string
	At       time.Time
	Version  int64
	AuditURL string // e.g. "/audit?entity=connection&id=…"
}
