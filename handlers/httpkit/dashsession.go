package httpkit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/sessions"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/web"
)

// Dashboard sessions live in Postgres (the sessions table). The cookie holds only a
// random 32-byte id, base64url; the table keys rows by its SHA-256, so a database
// dump does not hold usable cookies. A session expires sessionTTL after it was last
// saved, and an active user's session is saved again at most every
// sessionRefresh: a sliding 12-hour expiry. Signing in rotates the id, signing out
// deletes the row, and store.SetPassword and store.DeleteUser end a user's
// sessions at once.
const (
	SessionCookie  = "gatehouse_session"
	sessionIDBytes = 32
	sessionTTL     = 12 * time.Hour
	sessionRefresh = 10 * time.Minute
)

// Session value keys. Every value is a string, so the data round-trips through
// JSON unchanged.
const (
	sessKeyUser    = "uid"
	sessKeySeen    = "seen"    // unix seconds of the last save
	sessKeyFlashes = "flashes" // JSON array of web.Flash
)

// SessionStore is a gorilla/sessions Store over store.Store's sessions table.
type SessionStore struct {
	st     *store.Store
	secure bool
	now    func() time.Time
}

var _ sessions.Store = (*SessionStore)(nil)

func NewSessionStore(st *store.Store, secure bool, now func() time.Time) *SessionStore {
	return &SessionStore{st: st, secure: secure, now: now}
}

// Get returns the request's session, cached for the rest of the request.
func (ss *SessionStore) Get(r *http.Request, name string) (*sessions.Session, error) {
	return sessions.GetRegistry(r).Get(ss, name)
}

// New loads the session the request's cookie names, or returns a new empty one when
// there is no cookie or its session is unknown or expired. It never returns nil.
func (ss *SessionStore) New(r *http.Request, name string) (*sessions.Session, error) {
	sess := sessions.NewSession(ss, name)
	sess.Options = ss.options(r)
	sess.IsNew = true
	c, err := r.Cookie(name)
	if err != nil {
		return sess, nil
	}
	hash, ok := SessionHash(c.Value)
	if !ok {
		return sess, nil
	}
	data, uid, err := ss.st.LoadSession(r.Context(), hash)
	if errors.Is(err, store.ErrNotFound) {
		return sess, nil
	}
	if err != nil {
		return sess, fmt.Errorf("handlers: load session: %w", err)
	}
	values := map[string]string{}
	if len(data) > 0 && json.Unmarshal(data, &values) != nil {
		return sess, nil // unreadable data: start afresh
	}
	for k, v := range values {
		sess.Values[k] = v
	}
	// The user_id column is authoritative: deleting a user nulls or removes it.
	delete(sess.Values, sessKeyUser)
	if uid != "" {
		sess.Values[sessKeyUser] = uid
	}
	sess.ID = c.Value
	sess.IsNew = false
	return sess, nil
}

// Save writes the session and sets its cookie; a session with MaxAge < 0 is deleted
// and its cookie cleared. A session without an id gets a fresh random one.
func (ss *SessionStore) Save(r *http.Request, w http.ResponseWriter, sess *sessions.Session) error {
	if sess.Options == nil {
		sess.Options = ss.options(r)
	}
	if sess.Options.MaxAge < 0 {
		if hash, ok := SessionHash(sess.ID); ok {
			if err := ss.st.DeleteSession(r.Context(), hash); err != nil {
				return fmt.Errorf("handlers: delete session: %w", err)
			}
		}
		sess.ID = ""
		http.SetCookie(w, sessions.NewCookie(sess.Name(), "", sess.Options))
		return nil
	}
	if sess.ID == "" {
		raw := make([]byte, sessionIDBytes)
		_, _ = rand.Read(raw) // crypto/rand.Read never fails (Go 1.24+)
		sess.ID = base64.RawURLEncoding.EncodeToString(raw)
	}
	values := make(map[string]string, len(sess.Values))
	uid := ""
	for k, v := range sess.Values {
		ks, kok := k.(string)
		vs, vok := v.(string)
		if !kok || !vok {
			return fmt.Errorf("handlers: save session: value %v is not a string pair", k)
		}
		if ks == sessKeyUser {
			uid = vs
			continue
		}
		values[ks] = vs
	}
	data, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("handlers: encode session: %w", err)
	}
	hash, _ := SessionHash(sess.ID)
	if err := ss.st.SaveSession(r.Context(), hash, uid, data, ss.now().Add(sessionTTL)); err != nil {
		return fmt.Errorf("handlers: save session: %w", err)
	}
	http.SetCookie(w, sessions.NewCookie(sess.Name(), sess.ID, sess.Options))
	return nil
}

// options are the cookie attributes: HttpOnly, SameSite=Lax, Secure behind TLS.
func (ss *SessionStore) options(r *http.Request) *sessions.Options {
	return &sessions.Options{
		Path: "/", MaxAge: int(sessionTTL / time.Second), HttpOnly: true,
		Secure: ss.secure || OverTLS(r), SameSite: http.SameSiteLaxMode,
	}
}

// OverTLS reports whether the browser reached us over TLS: our own, or a proxy's that
// says so (X-Forwarded-Proto, Forwarded). Trusting the headers is safe here: they
// can only make a cookie Secure, which a plain-HTTP client would merely not send back.
func OverTLS(r *http.Request) bool {
	if r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") {
		return true
	}
	for _, f := range r.Header.Values("Forwarded") {
		for elem := range strings.SplitSeq(f, ",") {
			for pair := range strings.SplitSeq(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
					return true
				}
			}
		}
	}
	return false
}

// SessionHash decodes a cookie's session id and returns its SHA-256, the key the
// table stores; ok is false for anything that is not a well-formed id.
func SessionHash(id string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(raw) != sessionIDBytes {
		return nil, false
	}
	sum := sha256.Sum256(raw)
	return sum[:], true
}

// SessionState is one request's session with the dashboard's accessors. Changes are
// written by save only when something changed.
type SessionState struct {
	s     *sessions.Session
	dirty bool
}

// Load returns the request's session.
func (ss *SessionStore) Load(r *http.Request) (*SessionState, error) {
	sess, err := ss.Get(r, SessionCookie)
	if err != nil {
		return nil, err
	}
	return &SessionState{s: sess}, nil
}

// Write writes st when it changed.
func (ss *SessionStore) Write(r *http.Request, w http.ResponseWriter, st *SessionState) error {
	if st == nil || !st.dirty {
		return nil
	}
	if err := ss.Save(r, w, st.s); err != nil {
		return err
	}
	st.dirty = false
	return nil
}

// SignIn rotates the session id — the old row is deleted and the next save picks a
// new id — and binds the session to userID.
func (ss *SessionStore) SignIn(r *http.Request, st *SessionState, userID string, now time.Time) error {
	if hash, ok := SessionHash(st.s.ID); ok {
		if err := ss.st.DeleteSession(r.Context(), hash); err != nil {
			return fmt.Errorf("handlers: rotate session: %w", err)
		}
	}
	st.s.ID = ""
	st.s.Options = ss.options(r)
	for k := range st.s.Values {
		if k != sessKeyFlashes {
			delete(st.s.Values, k)
		}
	}
	st.s.Values[sessKeyUser] = userID
	st.s.Values[sessKeySeen] = strconv.FormatInt(now.Unix(), 10)
	st.dirty = true
	return nil
}

// End marks the session for deletion: the next save removes its row and cookie.
func (st *SessionState) End() {
	st.s.Options.MaxAge = -1
	st.dirty = true
}

// UserID is the signed-in user's id, or "".
func (st *SessionState) UserID() string {
	uid, _ := st.s.Values[sessKeyUser].(string)
	return uid
}

// SignOut forgets the user (their account is gone) and keeps the rest.
func (st *SessionState) SignOut() {
	delete(st.s.Values, sessKeyUser)
	st.dirty = true
}

// Touch slides the expiry of an active session, at most once per sessionRefresh.
func (st *SessionState) Touch(now time.Time) {
	seen, _ := st.s.Values[sessKeySeen].(string)
	last, err := strconv.ParseInt(seen, 10, 64)
	if err == nil && now.Sub(time.Unix(last, 0)) < sessionRefresh {
		return
	}
	st.s.Values[sessKeySeen] = strconv.FormatInt(now.Unix(), 10)
	st.dirty = true
}

// AddFlash queues a message for the next page.
func (st *SessionState) AddFlash(f web.Flash) {
	flashes := st.Flashes()
	flashes = append(flashes, f)
	data, err := json.Marshal(flashes)
	if err != nil {
		return // a Flash is two strings
	}
	st.s.Values[sessKeyFlashes] = string(data)
	st.dirty = true
}

// TakeFlashes returns the queued messages and clears them.
func (st *SessionState) TakeFlashes() []web.Flash {
	flashes := st.Flashes()
	if len(flashes) > 0 {
		delete(st.s.Values, sessKeyFlashes)
		st.dirty = true
	}
	return flashes
}

func (st *SessionState) Flashes() []web.Flash {
	raw, _ := st.s.Values[sessKeyFlashes].(string)
	var out []web.Flash
	if raw != "" {
		_ = json.Unmarshal([]byte(raw), &out) // an unreadable flash is dropped
	}
	return out
}
