package web

import (
	"embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed locales/*.json
var localeFiles embed.FS

// DefaultLocale is the locale used when nothing better matches, and the fallback for
// keys missing from another catalog.
const DefaultLocale = "en"

// Locales lists the supported locale tags, default first.
func Locales() []string { return []string{"en", "pt-BR"} }

// catalogs parses the embedded catalogs once. The result is never modified afterwards.
// The catalogs are compiled into the binary and a test parses them, so a parse error
// here is a build defect: it panics rather than rendering keys everywhere.
var catalogs = sync.OnceValue(func() map[string]map[string]string {
	out := make(map[string]map[string]string, len(Locales()))
	for _, tag := range Locales() {
		m, err := loadCatalog(tag)
		if err != nil {
			panic(err)
		}
		out[tag] = m
	}
	return out
})

func loadCatalog(tag string) (map[string]string, error) {
	b, err := localeFiles.ReadFile("locales/" + tag + ".json")
	if err != nil {
		return nil, fmt.Errorf("web: read catalog %s: %w", tag, err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("web: parse catalog %s: %w", tag, err)
	}
	return m, nil
}

// Localizer translates catalog keys into one locale's strings and formats numbers the
// way that locale writes them. A nil *Localizer behaves as English. It is immutable and
// safe for concurrent use.
type Localizer struct {
	tag      string
	msgs     map[string]string
	fallback map[string]string
}

// NewLocalizer returns the Localizer for tag. Tags are matched loosely ("pt", "pt-br",
// "pt_BR" → "pt-BR"); an unsupported tag gives English.
func NewLocalizer(tag string) *Localizer {
	tag = normalizeTag(tag)
	if tag == "" {
		tag = DefaultLocale
	}
	c := catalogs()
	return &Localizer{tag: tag, msgs: c[tag], fallback: c[DefaultLocale]}
}

// Tag returns the locale tag, e.g. "pt-BR".
func (l *Localizer) Tag() string {
	if l == nil {
		return DefaultLocale
	}
	return l.tag
}

// T returns the message for key, formatted with args by fmt.Sprintf rules when args are
// given (translations may reorder with %[2]s). A key missing from the locale falls back
// to English; a key missing everywhere is returned as is, so the gap is visible.
func (l *Localizer) T(key string, args ...any) string {
	if l == nil {
		l = NewLocalizer(DefaultLocale)
	}
	msg, ok := l.msgs[key]
	if !ok {
		msg, ok = l.fallback[key]
	}
	if !ok {
		return key
	}
	if len(args) == 0 {
		return msg
	}
	return fmt.Sprintf(msg, args...)
}

// N is T for a message that depends on a count: it looks up key+".one" or
// key+".other" by the locale's plural rule for n (English: one for 1; Brazilian
// Portuguese: one for 0 and 1) and formats with n followed by args.
func (l *Localizer) N(key string, n int64, args ...any) string {
	return l.T(l.plural(key, n), append([]any{n}, args...)...)
}

// Words is N for a message that holds no number: the words after a count drawn
// apart ("errors in the last minute").
func (l *Localizer) Words(key string, n int64) string { return l.T(l.plural(key, n)) }

// plural is key+".one" or key+".other" by the locale's plural rule for n.
func (l *Localizer) plural(key string, n int64) string {
	switch l.Tag() {
	case "pt-BR":
		if n == 0 || n == 1 {
			return key + ".one"
		}
	default:
		if n == 1 {
			return key + ".one"
		}
	}
	return key + ".other"
}

// HasKey reports whether key exists in the locale's catalog or the English fallback.
func (l *Localizer) HasKey(key string) bool {
	if l == nil {
		l = NewLocalizer(DefaultLocale)
	}
	_, ok := l.msgs[key]
	if !ok {
		_, ok = l.fallback[key]
	}
	return ok
}

// normalizeTag maps a tag onto a supported locale, or "" when none fits.
func normalizeTag(tag string) string {
	tag = strings.TrimSpace(strings.ReplaceAll(tag, "_", "-"))
	if tag == "" {
		return ""
	}
	lower := strings.ToLower(tag)
	for _, t := range Locales() {
		if strings.ToLower(t) == lower {
			return t
		}
	}
	primary, _, _ := strings.Cut(lower, "-")
	switch primary {
	case "en":
		return "en"
	case "pt":
		return "pt-BR"
	}
	return ""
}

// MatchLocale picks the locale for a request: the cookie's value when it names a
// supported locale, else the best match in the Accept-Language header (by q value,
// then order), else DefaultLocale.
func MatchLocale(acceptLanguage, cookie string) string {
	if t := normalizeTag(cookie); t != "" {
		return t
	}
	type cand struct {
		tag   string
		q     float64
		order int
	}
	var cands []cand
	for i, part := range strings.Split(acceptLanguage, ",") {
		fields := strings.Split(part, ";")
		tag := strings.TrimSpace(fields[0])
		q := 1.0
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
			if ok && strings.TrimSpace(k) == "q" {
				parsed, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					parsed = 0
				}
				q = parsed
			}
		}
		if q <= 0 || tag == "" || tag == "*" {
			continue
		}
		if t := normalizeTag(tag); t != "" {
			cands = append(cands, cand{tag: t, q: q, order: i})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].q > cands[j].q })
	if len(cands) > 0 {
		return cands[0].tag
	}
	return DefaultLocale
}
