package web

import (
	"net/http"
	"strconv"
	"time"
)

// Reasons a connection test was not sent (ProbeView.Refused).
const (
	ProbeNotLoaded = "notLoaded" // the gateway has no configuration yet
	ProbeUnknown   = "unknown"   // the gateway has not caught up with the connection yet
	ProbeDisabled  = "disabled"  // the connection is switched off
	ProbeNoModel   = "noModel"   // it lists no model the gateway routes
)

// ProbeView is what one test request through a connection got: the answer's
// text, or the error's code and message, and how long it took; or why it was
// not sent (Refused).
type ProbeView struct {
	Refused string // a Probe* reason; "" when the request was sent
	Model   string // the upstream model asked
	Status  int
	Text    string // the answer's text (2xx)
	Code    string // the error's code: Gatehouse's own or the upstream's
	Message string
	Latency time.Duration
}

// OK reports whether the upstream answered with success.
func (p ProbeView) OK() bool { return p.Refused == "" && p.Status >= 200 && p.Status < 300 }

// outcome names the result for styling and tests: ok, error or refused.
func (p ProbeView) outcome() string {
	switch {
	case p.Refused != "":
		return "refused"
	case p.OK():
		return "ok"
	default:
		return "error"
	}
}

// statusText writes the status with its words ("401 Unauthorized").
func (p ProbeView) statusText() string {
	if t := http.StatusText(p.Status); t != "" {
		return strconv.Itoa(p.Status) + " " + t
	}
	return strconv.Itoa(p.Status)
}
