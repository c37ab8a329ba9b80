package alert

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
)

// Severities of an Event.
const (
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// EventTest is the event of a test alert ("Send test" on /alerts): it goes
// to the one webhook asked, whatever events it wants, past every cooldown.
const EventTest = "test"

// Event is one alert condition as the gateway saw it.
type Event struct {
	// Name is the event (limits.Alert*), Subject what it is about (a key,
	// a connection, a gate, a session).
	Name    string
	Subject string
	// Condition tells apart the conditions of one subject that alert
	// separately (a budget's "daily 80%" and "daily 100%", a connection's
	// "suspended" and "breaker open"); the cooldown holds per
	// (Name, Subject, Condition).
	Condition string
	Severity  string
	Summary   string
	Details   map[string]any
	// Path is the dashboard page about the subject ("/keys/…"); the body's
	// dashboardUrl is the notifier's DashboardURL followed by it.
	Path string
	At   time.Time
}

// key is the cooldown key of e.
func (e *Event) key() string { return e.Name + "\x00" + e.Subject + "\x00" + e.Condition }

// jsonBody is the body of a webhook of format "json".
type jsonBody struct {
	Event        string         `json:"event"`
	Subject      string         `json:"subject"`
	Severity     string         `json:"severity"`
	Summary      string         `json:"summary"`
	Details      map[string]any `json:"details"`
	At           time.Time      `json:"at"`
	DashboardURL string         `json:"dashboardUrl"`
}

// Body renders e for a webhook of format ("json" or "slack"), with
// dashboardURL as the link to the subject's page.
func Body(e *Event, format, dashboardURL string) ([]byte, error) {
	if format == "slack" {
		text := "[" + e.Severity + "] " + e.Summary
		if dashboardURL != "" {
			text += " <" + dashboardURL + "|open in Gatehouse>"
		}
		return json.Marshal(struct {
			Text string `json:"text"`
		}{text})
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	return json.Marshal(jsonBody{Event: e.Name, Subject: e.Subject, Severity: e.Severity, Summary: e.Summary,
		Details: details, At: e.At.UTC(), DashboardURL: dashboardURL})
}

// Signature headers of a webhook with a secret.
const (
	HeaderTimestamp = "X-Gatehouse-Timestamp"
	HeaderSignature = "X-Gatehouse-Signature"
)

// Sign returns the X-Gatehouse-Timestamp and X-Gatehouse-Signature values
// for body sent at t: "sha256=" and the hex HMAC-SHA256 under secret of
// the timestamp (Unix seconds), a dot and the body.
func Sign(secret string, t time.Time, body []byte) (timestamp, signature string) {
	timestamp = strconv.FormatInt(t.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return timestamp, "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature is Sign's for timestamp and body under
// secret (what a receiver checks; tests use it too).
func Verify(secret, timestamp, signature string, body []byte) bool {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return hmac.Equal([]byte(signature), []byte("sha256="+hex.EncodeToString(m.Sum(nil))))
}
