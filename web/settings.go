package web

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// SettingsFields is the global settings form as typed; form names are the JSON names.
type SettingsFields struct {
	GlobalMaxConcurrent       string // globalMaxConcurrent
	DefaultMaxWaitMs          string // defaultMaxWaitMs
	DefaultExecutionMaxWaitMs string // defaultExecutionMaxWaitMs
	DefaultMaxQueueDepth      string // defaultMaxQueueDepth
	MaxAttempts               string // maxAttempts
	SuspendMs                 string // suspendMs
	BreakerFailures           string // breakerFailures
	BreakerCooldownMs         string // breakerCooldownMs
	// Providers is the per-provider caps textarea (form name "providers"): one
	// "provider maxConcurrent [maxWaitMs]" a line; see ParseProviderCaps.
	Providers string
	Version   string // version (hidden)
}

// SettingsForm is the settings page's view model.
type SettingsForm struct {
	Fields     SettingsFields
	Errors     FieldErrors
	ReadOnly   bool
	Conflict   *Conflict
	LastChange *Change
	Warnings   []string
}

// SettingsFieldNames returns the settings form's field names in page order.
func SettingsFieldNames() []string {
	return []string{
		"globalMaxConcurrent", "defaultMaxWaitMs", "defaultExecutionMaxWaitMs", "defaultMaxQueueDepth",
		"maxAttempts", "suspendMs", "breakerFailures", "breakerCooldownMs", "providers",
	}
}

// ProviderCap is one provider's gate settings (0 = off / the global default).
type ProviderCap struct {
	MaxConcurrent int
	MaxWaitMs     int
}

// LineError is one bad line of a textarea.
type LineError struct {
	Line int    // 1-based
	Text string // the line as typed, trimmed
	// Problem is a catalog key naming what is wrong, e.g. "lines.providerName".
	Problem string
}

// Message writes the error for a person: `line 2: "zai x": maxConcurrent must be a
// whole number from 0 to 10000`.
func (e LineError) Message(l *Localizer) string {
	return LineMessage(l, e.Line, e.Text, l.T(e.Problem))
}

// LineMessage writes any textarea line error in the dashboard's one format; handlers
// use it for the limits codec's errors too: LineMessage(l, 2, "glm-5=0", msg).
func LineMessage(l *Localizer, line int, text, msg string) string {
	return l.T("validation.line", line, text, msg)
}

var providerKey = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ParseProviderCaps reads the settings page's per-provider textarea: one
// "provider maxConcurrent [maxWaitMs]" a line (spaces or tabs between; blank lines and
// lines starting with # are ignored). maxConcurrent is 0–10000 (0 = off), maxWaitMs
// 0–120000 (0 or absent = the global default). Every bad line is reported, not only the
// first; a provider listed twice is an error. The map is nil when there are errors.
func ParseProviderCaps(text string) (map[string]ProviderCap, []LineError) {
	out := map[string]ProviderCap{}
	var errs []LineError
	for i, raw := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		line := strings.TrimSpace(raw)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(problem string) { errs = append(errs, LineError{Line: i + 1, Text: line, Problem: problem}) }
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			bad("lines.providerShape")
			continue
		}
		if !providerKey.MatchString(f[0]) {
			bad("lines.providerName")
			continue
		}
		if _, dup := out[f[0]]; dup {
			bad("lines.providerDuplicate")
			continue
		}
		var pc ProviderCap
		var ok bool
		if pc.MaxConcurrent, ok = wholeIn(f[1], 0, 10000); !ok {
			bad("lines.providerMaxConcurrent")
			continue
		}
		if len(f) == 3 {
			if pc.MaxWaitMs, ok = wholeIn(f[2], 0, 120000); !ok {
				bad("lines.providerMaxWaitMs")
				continue
			}
		}
		out[f[0]] = pc
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// FormatProviderCaps writes caps as ParseProviderCaps reads them, providers sorted,
// "provider maxConcurrent maxWaitMs" (maxWaitMs left out when 0).
func FormatProviderCaps(caps map[string]ProviderCap) string {
	keys := make([]string, 0, len(caps))
	for k := range caps {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		c := caps[k]
		if c.MaxWaitMs > 0 {
			fmt.Fprintf(&b, "%s %d %d\n", k, c.MaxConcurrent, c.MaxWaitMs)
		} else {
			fmt.Fprintf(&b, "%s %d\n", k, c.MaxConcurrent)
		}
	}
	return b.String()
}

// wholeIn parses a whole decimal number within [lo, hi].
func wholeIn(s string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi || strings.HasPrefix(s, "+") {
		return 0, false
	}
	return n, true
}
