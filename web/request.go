package web

import (
	"net/url"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway/limits"
	"github.com/gatehouse-dev/gatehouse/gateway/requestlog"
)

// RequestRow is one request of the log as the pages show it: the request log's
// row, and the price the request page splits its cost by.
type RequestRow struct {
	requestlog.Row
	// Rate is the model's price today (Found false: none), for the cost
	// split of the request page; the logged cost is CostMicros.
	Rate limits.Rate
}

// RequestAttempt is one upstream attempt of a request (package requestlog).
type RequestAttempt = requestlog.Attempt

// attempts is every upstream attempt of r: its detail, or the row itself when
// its one attempt served it (none when nothing was dispatched).
func (r RequestRow) attempts() []RequestAttempt {
	if len(r.AttemptsDetail) > 0 {
		return r.AttemptsDetail
	}
	if r.Attempts == 0 || r.ConnectionName == "" {
		return nil
	}
	code := r.Code
	if code == CodeClientGone {
		code = ""
	}
	return []RequestAttempt{{ConnectionID: r.ConnectionID, ConnectionName: r.ConnectionName, Status: r.Status,
		Ms: r.UpstreamMs, Code: code}}
}

// CodeClientGone is the request log's code of a client that went away before
// its answer (status 499).
const CodeClientGone = "CLIENT_GONE"

// attemptClass is an attempt row's class by the status it got (no answer is
// a server error's).
func attemptClass(a RequestAttempt) string {
	if a.Status == 0 {
		return "status-5xx"
	}
	return statusClass(a.Status)
}

// attemptStatus writes an attempt's status, or that the upstream gave none.
func attemptStatus(l *Localizer, a RequestAttempt) string {
	if a.Status == 0 {
		return l.T("requests.noAnswer")
	}
	return strconv.Itoa(a.Status)
}

// attemptWhy explains a failed attempt in words: by its status when the
// upstream answered one (429, 401, 403, 408, 5xx), else by its code.
func attemptWhy(l *Localizer, a RequestAttempt) string {
	switch {
	case a.Code == "":
		return ""
	case a.Status == 429, a.Status == 401, a.Status == 403, a.Status == 408:
		return l.T("requests.why." + strconv.Itoa(a.Status))
	case a.Status >= 500:
		return l.T("requests.why.5xx")
	}
	return codeText(l, a.Code)
}

// askedModel reports whether r's failure is about the model it asked for, so
// the page names that model beside the code.
func (r RequestRow) askedModel() bool {
	return r.Code == "MODEL_NOT_FOUND" || r.Code == "MODEL_NOT_ALLOWED"
}

// clientGone reports whether r's client went away before its answer: code
// CLIENT_GONE, or status 499 in a row logged before the code was.
func (r RequestRow) clientGone() bool {
	return r.Code == CodeClientGone || (r.Code == "" && r.Status == 499)
}

// costSplit is r's tokens by kind at Rate, with the catalog key of each.
func (r RequestRow) costSplit() []costLine {
	s := r.Rate.Split(r.InputTokens, r.CachedTokens, r.CacheWriteTokens, r.OutputTokens)
	return []costLine{{"input", "requests.split.input", s[limits.PartInput]},
		{"cache-read", "requests.split.cacheRead", s[limits.PartCacheRead]},
		{"cache-write", "requests.split.cacheWrite", s[limits.PartCacheWrite]},
		{"output", "requests.split.output", s[limits.PartOutput]}}
}

// splitTotal is the sum of the split's parts.
func (r RequestRow) splitTotal() int64 {
	var n int64
	for _, c := range r.costSplit() {
		n += int64(c.part.Cost)
	}
	return n
}

// costLine is one line of a request's cost split.
type costLine struct {
	id, key string
	part    limits.CostPart
}

// ratio is part ÷ whole, 0 when whole is not positive.
func ratio(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// hitText writes the share of input read from the cache as a whole
// percentage ("95 %"), "–" without input (nothing to hit).
func hitText(l *Localizer, read, input int64) string {
	if input <= 0 {
		return "–"
	}
	return l.Int(int64(ratio(read, input)*100+0.5)) + " %"
}

// RequestFilter is the /requests filter form as typed (the query's names).
type RequestFilter struct {
	Key, Connection, Model, Status, Code, Since, Until, Session string
	// Last is a time range ending now ("15m", "1h", "24h", "7d"), "" for none.
	Last string
}

// Option is one choice of a select.
type Option struct {
	Value, Label string
}

// RequestList is the /requests page's view model.
type RequestList struct {
	Filter      RequestFilter
	Errors      FieldErrors
	Keys        []Option // the client keys, for the key filter
	Connections []Option // the connections, for the connection filter
	Rows        []RequestRow
	// NextURL is the next (older) page, "" on the last; FirstURL the first page
	// when this is not it.
	NextURL, FirstURL string
	// CSVURL downloads the rows of this filter (up to a thousand).
	CSVURL string
	// Lasts are the choices of the "last" filter.
	Lasts []Option
	// LiveURL redraws the rows (RequestRows) every LiveIntervalMs; "" on an
	// older page, which stays as it is.
	LiveURL        string
	LiveIntervalMs int
}

// RequestsURL is the /requests page filtered by one key or connection id
// (filter "key" or "connection").
func RequestsURL(filter, id string) string {
	return "/requests?" + filter + "=" + url.QueryEscape(id)
}

// statusClass is a row's class by the status the client got.
func statusClass(status int) string {
	switch {
	case status >= 500:
		return "status-5xx"
	case status == 429:
		return "status-429"
	case status >= 400:
		return "status-4xx"
	}
	return "status-ok"
}

// usd writes micro-dollars as dollars with 6 decimals trimmed: "$0.006".
func usd(micros int64) string {
	neg := micros < 0
	if neg {
		micros = -micros
	}
	s := strconv.FormatInt(micros/1_000_000, 10)
	if frac := micros % 1_000_000; frac != 0 {
		f := strconv.FormatInt(frac+1_000_000, 10)[1:]
		for len(f) > 2 && f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		s += "." + f
	}
	if neg {
		s = "-" + s
	}
	return "$" + s
}

// ms writes milliseconds with their unit.
func msText(l *Localizer, n int) string { return l.Int(int64(n)) + " ms" }

// codeText explains a Gatehouse error code in words ("" when the catalog has none).
func codeText(l *Localizer, code string) string {
	if code == "" {
		return ""
	}
	return catalogOr(l, "code."+code, "")
}

// UsageView is the /usage page's view model.
type UsageView struct {
	// Range is the chosen time range ("24h" or "7d"); Ranges the choices.
	Range  string
	Ranges []Option
	Charts []Chart
	// Cache is prompt-cache use over the range per key, connection and model.
	Cache CacheView
	// Cost ranks models, providers, connections and keys by cost over the range.
	Cost CostView
	// LiveURL redraws the charts and the cache table every LiveIntervalMs.
	LiveURL        string
	LiveIntervalMs int
}
