package web

import (
	"net/url"
	"strconv"
	"time"
)

// SessionList is the /sessions page: the sessions active within the last 15
// minutes, filtered by key and state.
type SessionList struct {
	Rows []SessionRow
	// Keys are the client keys to filter by (id and name).
	Keys []SessionKey
	// Key and State are the filters in force ("" = any).
	Key, State string
	// LiveURL is polled for the rows (JSON with a "sessions" fragment);
	// LiveIntervalMs how often.
	LiveURL        string
	LiveIntervalMs int
}

// SessionKey is a client key in the filter.
type SessionKey struct{ ID, Name string }

// SessionStates are the states a session may be in, as the API names them.
var SessionStates = []string{"ok", "looping", "over budget", "stopped"}

// SessionRow is one session on /sessions.
type SessionRow struct {
	Session, KeyName, Client, Connection, State string
	Requests, InFlight, Waiting                 int64
	InputTokens, OutputTokens, CachedTokens     int64
	CostMicros                                  int64
	LastSeen                                    time.Time
}

// sessionRequestsURL is the request log filtered to the session.
func sessionRequestsURL(session string) string {
	return "/requests?" + url.Values{"session": {session}}.Encode()
}

// sessionAction is the URL of a session's stop or resume, back to the page
// with its filters.
func sessionAction(v SessionList, session, action string) string {
	u := "/sessions/" + url.PathEscape(session) + "/" + action
	q := url.Values{}
	if v.Key != "" {
		q.Set("key", v.Key)
	}
	if v.State != "" {
		q.Set("state", v.State)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// cacheRatio is the share of input tokens read from the prompt cache, as a
// percentage ("–" without input).
func cacheRatio(cached, input int64) string {
	if input <= 0 {
		return "–"
	}
	return strconv.FormatInt(cached*100/input, 10) + " %"
}

// sessionTone is the tone class of a state: only ok is good.
func sessionTone(state string) string {
	switch state {
	case "ok":
		return "tone-good"
	case "stopped":
		return "tone-off"
	}
	return "tone-bad"
}

// stateKey is a state's catalog key ("over budget" → session.state.overBudget).
func stateKey(state string) string {
	if state == "over budget" {
		return "session.state.overBudget"
	}
	return "session.state." + state
}
