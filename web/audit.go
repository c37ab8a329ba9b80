package web

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AuditEntry is one audit-log row, with its change already diffed (see DiffJSON).
type AuditEntry struct {
	ID         string
	At         time.Time
	Actor      string // "user:<email>", "token:<name>" or "system"; shown by ActorName
	Action     string // e.g. "create", "update", "delete", "toggle", "revoke", "login"
	Entity     string // e.g. "connection", "settings", "client_key", "api_token", "user"
	EntityID   string
	EntityName string // e.g. the connection's name, when known
	Diff       []DiffLine
}

// ActorUserPrefix starts the audit actor of a dashboard user: "user:<email>".
const ActorUserPrefix = "user:"

// ActorName is how a page names an audit actor: a dashboard user by their email
// (the "user:" prefix dropped), anyone else ("token:<name>", "system") as recorded.
func ActorName(actor string) string {
	if email, ok := strings.CutPrefix(actor, ActorUserPrefix); ok && email != "" {
		return email
	}
	return actor
}

// AuditList is the audit page's view model.
type AuditList struct {
	// Filter is the filter as typed; Errors its problems by field (since, until).
	Filter AuditFilter
	Errors FieldErrors
	// Entities and Actions are the choices of the entity and action filters.
	Entities, Actions []string
	Entries           []AuditEntry
	// OlderURL links to the next page of older entries ("" when this is the last page),
	// e.g. "/audit?before=<cursor>".
	OlderURL string
	// NewestURL links back to the first page when this page is not it.
	NewestURL string
}

// AuditFilter is the audit page's filter as typed: an actor (an e-mail, "token:ci",
// "system"), an entity kind, an action and a time range (RFC 3339).
type AuditFilter struct {
	Actor, Entity, EntityID, Action, Since, Until string
}

// AuditEntities and AuditActions are the filter's choices: what the store records.
var (
	AuditEntities = []string{"connection", "settings", "client_key", "api_token", "user"}
	AuditActions  = []string{"create", "update", "delete", "set_password", "set_role",
		"sign_in", "sign_in_failed", "sign_in_throttled", "test"}
)

// Diff operations.
const (
	DiffAdded   = "added"
	DiffRemoved = "removed"
	DiffChanged = "changed"
)

// DiffLine is one changed leaf: "rateLimitOverrides.modelConcurrency.glm-5: 1 → 2".
type DiffLine struct {
	Path   string // dotted path; "" for a whole document that is not an object
	Op     string // DiffAdded, DiffRemoved or DiffChanged
	Before string // compact JSON of the old value ("" when added)
	After  string // compact JSON of the new value ("" when removed)
}

// DiffJSON compares two JSON documents and lists what changed, leaf by leaf, sorted by
// path. Objects are flattened into dotted paths (a key containing a dot or bracket is
// written ["like.this"]); an empty object is no leaf at all; arrays and scalars are
// leaves, written as compact JSON. Empty
// or null input counts as an empty object. A document that is not valid JSON is
// compared as a whole, as text.
func DiffJSON(before, after []byte) []DiffLine {
	b, okB := flattenJSON(before)
	a, okA := flattenJSON(after)
	if !okB || !okA {
		bs, as := strings.TrimSpace(string(before)), strings.TrimSpace(string(after))
		if bs == as {
			return nil
		}
		return []DiffLine{{Op: DiffChanged, Before: bs, After: as}}
	}
	var out []DiffLine
	for p, bv := range b {
		av, ok := a[p]
		switch {
		case !ok:
			out = append(out, DiffLine{Path: p, Op: DiffRemoved, Before: bv})
		case av != bv:
			out = append(out, DiffLine{Path: p, Op: DiffChanged, Before: bv, After: av})
		}
	}
	for p, av := range a {
		if _, ok := b[p]; !ok {
			out = append(out, DiffLine{Path: p, Op: DiffAdded, After: av})
		}
	}
	slices.SortFunc(out, func(x, y DiffLine) int { return strings.Compare(x.Path, y.Path) })
	return out
}

// flattenJSON maps every leaf path of doc to its compact JSON.
func flattenJSON(doc []byte) (map[string]string, bool) {
	out := map[string]string{}
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 || string(doc) == "null" {
		return out, true
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	flattenValue(out, "", v)
	return out, true
}

func flattenValue(out map[string]string, path string, v any) {
	// An empty object adds no leaf: "{}" and an absent key mean the same (no overrides).
	if obj, ok := v.(map[string]any); ok {
		for k, child := range obj {
			flattenValue(out, joinPath(path, k), child)
		}
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("?")
	}
	out[path] = string(b)
}

func joinPath(parent, key string) string {
	seg := key
	if key == "" || strings.ContainsAny(key, ".[]\"") {
		seg = "[" + strconv.Quote(key) + "]"
		if parent == "" {
			return seg
		}
		return parent + seg
	}
	if parent == "" {
		return seg
	}
	return parent + "." + seg
}

// PathSep joins the keys of a diff path on the audit page.
const PathSep = " › "

// pathKeys splits a DiffJSON path back into its keys: "a.b" and `a["glm-4.7"]`
// are ["a", "b"] and ["a", "glm-4.7"]. What it cannot read stays one key.
func pathKeys(p string) []string {
	var keys []string
	for p != "" {
		if rest, ok := strings.CutPrefix(p, "["); ok {
			end := strings.Index(rest, "\"]")
			for end >= 0 && end+2 < len(rest) && rest[end+2] != '.' && rest[end+2] != '[' {
				next := strings.Index(rest[end+1:], "\"]")
				if next < 0 {
					end = -1
					break
				}
				end += 1 + next
			}
			if end < 0 {
				return append(keys, p)
			}
			k, err := strconv.Unquote(rest[:end+1])
			if err != nil {
				return append(keys, p)
			}
			keys = append(keys, k)
			p = strings.TrimPrefix(rest[end+2:], ".")
			continue
		}
		i := strings.IndexAny(p, ".[")
		if i < 0 {
			keys = append(keys, p)
			break
		}
		keys = append(keys, p[:i])
		p = strings.TrimPrefix(p[i:], ".")
	}
	return keys
}

// shortPath is how the audit page writes a diff path: its keys joined by PathSep,
// whatever they hold, so every nested key reads one way (modelConcurrency › glm-5 and
// modelConcurrency › glm-4.7, not .glm-5 beside ["glm-4.7"]), and without the
// "rateLimitOverrides" prefix.
func shortPath(p string) string {
	keys := pathKeys(p)
	if len(keys) > 1 && keys[0] == "rateLimitOverrides" {
		keys = keys[1:]
	}
	return strings.Join(keys, PathSep)
}

// catalogOr returns the message for key, or fallback when the catalog has no such key
// (actions and entities recorded by newer code still show).
func catalogOr(l *Localizer, key, fallback string) string {
	if l.HasKey(key) {
		return l.T(key)
	}
	return fallback
}

func diffMark(op string) string {
	switch op {
	case DiffAdded:
		return "+"
	case DiffRemoved:
		return "−"
	default:
		return "~"
	}
}
