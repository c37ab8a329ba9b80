package web

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/a-h/templ"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
)

// TrafficCount is one (connection, key, status, code) of the request log over the
// last minute; ConnectionID or KeyID is "" when the request reached no connection or
// carried no known key.
type TrafficCount struct {
	ConnectionID, KeyID string
	Status              int
	Code                string
	Requests            int64
	UpstreamFailures    int64
}

// DayTotal is one (key, connection) of today's spend: dispatched requests, tokens
// (input and output) and cost in micro-dollars.
type DayTotal struct {
	KeyID, ConnectionID string
	Requests            int64
	Tokens              int64
	CostMicros          int64
}

// CodeCount is how many answers of the last minute had one status and code.
type CodeCount struct {
	Status int
	Code   string // the Gatehouse code, "" for an upstream's own answer
	Count  int64
}

// TrafficLine is the traffic of one connection, one key or the whole gateway:
// requests and errors over the last minute, tokens and spend over the UTC day.
type TrafficLine struct {
	PerMinute int64
	// Errors are the non-2xx answers of the last minute by status and code, most first.
	Errors           []CodeCount
	ErrorTotal       int64
	UpstreamFailures int64
	TokensToday      int64
	CostTodayMicros  int64
}

// KeyTraffic is one client key's traffic, for the overview's keys table.
type KeyTraffic struct {
	ID, Name string
	TrafficLine
	Budget KeyBudget
}

// KeyBudget is a client key's money budgets (nil: none) and what it spent this
// UTC month.
type KeyBudget struct {
	Daily, Monthly   *limits.Micros
	SpentMonthMicros int64
}

// Traffic is the overview's view of the request log: the last minute and today.
type Traffic struct {
	// Off is true when there is no request log to read (GATEHOUSE_REQUEST_LOG=off,
	// or the database did not answer); the page says so instead of showing zeros.
	Off bool
	// Since is the start of the last minute, for the links to /requests.
	Since       time.Time
	Total       TrafficLine
	Connections map[string]TrafficLine
	// Keys are the keys with traffic today or in the last minute, busiest first.
	Keys []KeyTraffic
}

// TrafficInput is what BuildTraffic sums.
type TrafficInput struct {
	Now    time.Time
	Recent []TrafficCount // the last minute
	Today  []DayTotal
	// KeyNames names the client keys by id; a key missing from it is shown by id.
	KeyNames map[string]string
	// KeyBudgets are the keys' money budgets and month's spend, by id.
	KeyBudgets map[string]KeyBudget
	// ConnectionIDs are the stored connections: each gets a line, traffic or not.
	ConnectionIDs []string
}

// BuildTraffic sums the last minute and today per connection, per key and in total.
func BuildTraffic(in TrafficInput) Traffic {
	t := Traffic{Since: in.Now.Add(-time.Minute), Connections: map[string]TrafficLine{}}
	for _, id := range in.ConnectionIDs {
		t.Connections[id] = TrafficLine{}
	}
	keys := map[string]*TrafficLine{}
	keyLine := func(id string) *TrafficLine {
		if keys[id] == nil {
			keys[id] = &TrafficLine{}
		}
		return keys[id]
	}
	for _, r := range in.Recent {
		lines := []*TrafficLine{&t.Total}
		var conn TrafficLine
		if r.ConnectionID != "" {
			conn = t.Connections[r.ConnectionID]
			lines = append(lines, &conn)
		}
		if r.KeyID != "" {
			lines = append(lines, keyLine(r.KeyID))
		}
		for _, l := range lines {
			l.add(r)
		}
		if r.ConnectionID != "" {
			t.Connections[r.ConnectionID] = conn
		}
	}
	for _, d := range in.Today {
		c := t.Connections[d.ConnectionID]
		c.TokensToday += d.Tokens
		c.CostTodayMicros += d.CostMicros
		t.Connections[d.ConnectionID] = c
		k := keyLine(d.KeyID)
		k.TokensToday += d.Tokens
		k.CostTodayMicros += d.CostMicros
		t.Total.TokensToday += d.Tokens
		t.Total.CostTodayMicros += d.CostMicros
	}
	for id, l := range keys {
		name := in.KeyNames[id]
		if name == "" {
			name = id
		}
		t.Keys = append(t.Keys, KeyTraffic{ID: id, Name: name, TrafficLine: *l, Budget: in.KeyBudgets[id]})
	}
	slices.SortFunc(t.Keys, func(a, b KeyTraffic) int {
		return cmp.Or(cmp.Compare(b.PerMinute, a.PerMinute), cmp.Compare(b.TokensToday, a.TokensToday), cmp.Compare(a.Name, b.Name))
	})
	return t
}

// add counts r into l.
func (l *TrafficLine) add(r TrafficCount) {
	l.PerMinute += r.Requests
	l.UpstreamFailures += r.UpstreamFailures
	if r.Status < 400 {
		return
	}
	l.ErrorTotal += r.Requests
	i := slices.IndexFunc(l.Errors, func(c CodeCount) bool { return c.Status == r.Status && c.Code == r.Code })
	if i < 0 {
		l.Errors = append(l.Errors, CodeCount{Status: r.Status, Code: r.Code})
		i = len(l.Errors) - 1
	}
	l.Errors[i].Count += r.Requests
	slices.SortStableFunc(l.Errors, func(a, b CodeCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Status, b.Status), cmp.Compare(a.Code, b.Code))
	})
}

// Line returns connection id's traffic (zero when it had none).
func (t Traffic) Line(id string) TrafficLine { return t.Connections[id] }

// errorsURL is /requests filtered to one status and code over the last minute, and
// to a connection or key when filter is "connection" or "key".
func (t Traffic) errorsURL(c CodeCount, filter, id string) string {
	q := url.Values{}
	if filter != "" {
		q.Set(filter, id)
	}
	q.Set("status", strconv.Itoa(c.Status))
	if c.Code != "" {
		q.Set("code", c.Code)
	}
	q.Set("since", t.Since.UTC().Format(time.RFC3339))
	return "/requests?" + q.Encode()
}

// codeName names an error: its Gatehouse code, or that the upstream answered so.
func codeName(p Page, c CodeCount) string {
	if c.Code != "" {
		return c.Code
	}
	if c.Status == 499 {
		// A row logged before CLIENT_GONE was: the client hung up.
		return p.L.T("traffic.clientGone")
	}
	return p.L.T("traffic.fromUpstream")
}

// codeTitle explains an error in words: the code's explanation, or the status's name.
func codeTitle(p Page, c CodeCount) string {
	if s := codeText(p.L, c.Code); s != "" {
		return s
	}
	return statusText(p, c.Status)
}

// TrafficFragments are the overview's parts that /live sends again as HTML, by the
// name of the element (data-live-fragment) whose content each one replaces.
func TrafficFragments(p Page, t Traffic) map[string]templ.Component {
	m := map[string]templ.Component{
		"sum-errors": summaryErrors(p, t),
		"keys":       keyTraffic(p, t),
	}
	for id := range t.Connections {
		m["conn-"+id] = connTraffic(p, t, id)
	}
	return m
}

// errorsWords is "errors in the last minute" after a count, with the colon that
// introduces the list of codes when there is one ("… minute: 3 × 404 …", no space
// before the colon).
func errorsWords(p Page, l TrafficLine) string {
	w := p.L.Words("traffic.errorsLastMinute", l.ErrorTotal)
	if len(l.Errors) > 0 {
		w += ":"
	}
	return w
}
