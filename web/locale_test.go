package web

import (
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCatalogsParse(t *testing.T) {
	t.Parallel()
	for _, tag := range Locales() {
		m, err := loadCatalog(tag)
		if err != nil {
			t.Fatalf("catalog %s: %v", tag, err)
		}
		if len(m) == 0 {
			t.Fatalf("catalog %s is empty", tag)
		}
	}
}

// verbs lists a message's formatting verbs, so a translation cannot drop or add one.
var verbRE = regexp.MustCompile(`%(\[\d+\])?[sdvq]`)

func verbs(msg string) []string {
	v := verbRE.FindAllString(msg, -1)
	slices.Sort(v)
	return v
}

func TestCatalogCompleteness(t *testing.T) {
	t.Parallel()
	en, err := loadCatalog("en")
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range Locales()[1:] {
		other, err := loadCatalog(tag)
		if err != nil {
			t.Fatal(err)
		}
		for k, msg := range en {
			tr, ok := other[k]
			if !ok {
				t.Errorf("%s: key %q missing", tag, k)
				continue
			}
			if tr == "" {
				t.Errorf("%s: key %q is empty", tag, k)
			}
			// positional verbs may be reordered; plain ones must match in number and kind
			if diff := cmp.Diff(normVerbs(verbs(msg)), normVerbs(verbs(tr))); diff != "" {
				t.Errorf("%s: key %q verbs mismatch (-en +%s):\n%s", tag, k, tag, diff)
			}
		}
		for k := range other {
			if _, ok := en[k]; !ok {
				t.Errorf("%s: key %q is not in en", tag, k)
			}
		}
	}
}

// normVerbs drops explicit argument indexes: "%[2]s" counts as "%s".
func normVerbs(v []string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = regexp.MustCompile(`\[\d+\]`).ReplaceAllString(s, "")
	}
	slices.Sort(out)
	return out
}

func TestLocalizer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tag  string
		key  string
		args []any
		want string
	}{
		{name: "english", tag: "en", key: "nav.connections", want: "Connections"},
		{name: "portuguese", tag: "pt-BR", key: "nav.connections", want: "Conexões"},
		{name: "loose tag", tag: "pt_br", key: "nav.connections", want: "Conexões"},
		{name: "primary tag", tag: "pt", key: "nav.connections", want: "Conexões"},
		{name: "unsupported tag falls back", tag: "de-DE", key: "nav.connections", want: "Connections"},
		{name: "empty tag", tag: "", key: "nav.connections", want: "Connections"},
		{name: "args", tag: "en", key: "placeholder.default", args: []any{"30000"}, want: "default 30000"},
		{name: "reordered args", tag: "en", key: "validation.line", args: []any{2, "glm-5=0", "bad"}, want: `line 2: "glm-5=0": bad`},
		{name: "missing key shows key", tag: "pt-BR", key: "no.such.key", want: "no.such.key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := NewLocalizer(tt.tag).T(tt.key, tt.args...); got != tt.want {
				t.Errorf("T(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}

func TestLocalizerNil(t *testing.T) {
	t.Parallel()
	var l *Localizer
	if got := l.T("nav.overview"); got != "Overview" {
		t.Errorf("nil Localizer T = %q, want English", got)
	}
	if got := l.Tag(); got != "en" {
		t.Errorf("nil Localizer Tag = %q", got)
	}
}

func TestLocalizerFallsBackToEnglish(t *testing.T) {
	t.Parallel()
	l := NewLocalizer("pt-BR")
	l = &Localizer{tag: l.tag, msgs: map[string]string{}, fallback: l.fallback}
	if got := l.T("nav.overview"); got != "Overview" {
		t.Errorf("T with empty pt-BR catalog = %q, want the English fallback", got)
	}
}

func TestPlural(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tag  string
		n    int64
		want string
	}{
		{name: "en one", tag: "en", n: 1, want: "Try again in 1 second."},
		{name: "en zero", tag: "en", n: 0, want: "Try again in 0 seconds."},
		{name: "en many", tag: "en", n: 5, want: "Try again in 5 seconds."},
		{name: "pt zero is singular", tag: "pt-BR", n: 0, want: "Tente de novo em 0 segundo."},
		{name: "pt many", tag: "pt-BR", n: 2, want: "Tente de novo em 2 segundos."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := NewLocalizer(tt.tag).N("login.retryAfter", tt.n); got != tt.want {
				t.Errorf("N = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMatchLocale(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		accept string
		cookie string
		want   string
	}{
		{name: "nothing", want: "en"},
		{name: "cookie wins", accept: "en-US,en;q=0.9", cookie: "pt-BR", want: "pt-BR"},
		{name: "bad cookie ignored", accept: "pt-BR", cookie: "xx", want: "pt-BR"},
		{name: "browser pt-BR", accept: "pt-BR,pt;q=0.9,en;q=0.8", want: "pt-BR"},
		{name: "browser pt-PT maps to pt-BR", accept: "pt-PT", want: "pt-BR"},
		{name: "q ordering", accept: "en;q=0.5, pt-BR;q=0.8", want: "pt-BR"},
		{name: "unsupported first", accept: "de-DE,de;q=0.9,pt;q=0.7,en;q=0.5", want: "pt-BR"},
		{name: "q zero excluded", accept: "pt-BR;q=0, en;q=0.1", want: "en"},
		{name: "only unsupported", accept: "fr, de", want: "en"},
		{name: "wildcard", accept: "*", want: "en"},
		{name: "garbage", accept: ";;,q=,", want: "en"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := MatchLocale(tt.accept, tt.cookie); got != tt.want {
				t.Errorf("MatchLocale(%q, %q) = %q, want %q", tt.accept, tt.cookie, got, tt.want)
			}
		})
	}
}
