package web

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/a-h/templ/parser/v2"
	"github.com/a-h/templ/parser/v2/visitor"
	"github.com/gatehouse-dev/gatehouse/gateway/live"
)

func hasLetter(s string) bool {
	return strings.IndexFunc(s, unicode.IsLetter) >= 0
}

// userFacingAttrs are attributes a person reads or hears.
var userFacingAttrs = map[string]bool{"placeholder": true, "title": true, "aria-label": true, "alt": true, "label": true}

// TestTemplatesHaveNoLiteralText fails when a .templ file holds text a person would
// read outside a catalog lookup: a text node with letters, a string literal with
// letters in { }, or a literal placeholder/title/aria-label/alt.
func TestTemplatesHaveNoLiteralText(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.templ")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .templ files found: %v", err)
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tf, err := parser.Parse(name)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			for _, p := range literalTextProblems(name, tf) {
				t.Error(p)
			}
		})
	}
}

// literalTextProblems lists the literal user-facing text in a parsed template file.
func literalTextProblems(name string, tf *parser.TemplateFile) []string {
	var problems []string
	report := func(r parser.Range, what string) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", name, r.From.Line+1, what))
	}
	v := visitor.New()
	v.Text = func(n *parser.Text) error {
		if hasLetter(n.Value) {
			report(n.Range, fmt.Sprintf("literal text %q", strings.TrimSpace(n.Value)))
		}
		return nil
	}
	v.StringExpression = func(n *parser.StringExpression) error {
		if s, err := strconv.Unquote(strings.TrimSpace(n.Expression.Value)); err == nil && hasLetter(s) {
			report(n.Range, fmt.Sprintf("literal string %q", s))
		}
		return nil
	}
	v.ConstantAttribute = func(n *parser.ConstantAttribute) error {
		if userFacingAttrs[n.Key.String()] && hasLetter(n.Value) {
			report(n.Range, fmt.Sprintf("literal %s=%q", n.Key.String(), n.Value))
		}
		return nil
	}
	if err := tf.Visit(v); err != nil {
		problems = append(problems, fmt.Sprintf("%s: visit: %v", name, err))
	}
	return problems
}

func TestLiteralTextProblemsFindsText(t *testing.T) {
	t.Parallel()
	src := `package web

templ x(p Page) {
	<div title="Hover me">
		if true {
			<p>Hello there</p>
		}
		{ "Literal" }
		{ p.L.T("nav.overview") }
		<span>→ 3 / 4</span>
	</div>
}
`
	tf, err := parser.ParseString(src)
	if err != nil {
		t.Fatal(err)
	}
	got := literalTextProblems("x.templ", tf)
	if len(got) != 3 {
		t.Errorf("found %d problems, want 3 (title, text, string literal): %q", len(got), got)
	}
}

// keyCall finds catalog lookups with a literal key: .T("key" and .N("key".
var keyCall = regexp.MustCompile(`\.(T|N)\("([^"]+)"`)

// TestLiteralKeysExist checks that every literal key looked up in this package's
// templates and Go files is in the English catalog (N keys need .one and .other).
func TestLiteralKeysExist(t *testing.T) {
	t.Parallel()
	en, err := loadCatalog("en")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pat := range []string{"*.templ", "*.go"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || strings.HasSuffix(name, "_templ.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range keyCall.FindAllStringSubmatch(string(b), -1) {
			key := m[2]
			if strings.HasSuffix(key, ".") {
				continue // a dynamic key: prefix + value, covered by TestDynamicKeysExist
			}
			want := []string{key}
			if m[1] == "N" {
				want = []string{key + ".one", key + ".other"}
			}
			for _, k := range want {
				if _, ok := en[k]; !ok {
					t.Errorf("%s: key %q is not in the en catalog", name, k)
				}
			}
		}
	}
}

// TestDynamicKeysExist checks the keys built from a prefix and a known value.
func TestDynamicKeysExist(t *testing.T) {
	t.Parallel()
	l := NewLocalizer("en")
	var keys []string
	for _, n := range []string{NavOverview, NavConnections, NavSettings, NavKeys, NavTokens, NavAudit, NavUsers} {
		keys = append(keys, "nav."+n)
	}
	for _, r := range []string{RoleAdmin, RoleViewer} {
		keys = append(keys, "role."+r)
	}
	for _, tag := range Locales() {
		keys = append(keys, "lang."+tag)
	}
	for _, s := range []string{StateIdle, StateBusy, StateFull, StateQueueing, StateRejecting} {
		keys = append(keys, "state."+s)
	}
	for _, h := range []string{live.HealthOK, live.HealthCooling, live.HealthSuspended, live.HealthBreakerOpen, live.HealthHalfOpen, HealthDisabled} {
		keys = append(keys, "health."+h)
	}
	for _, m := range []string{live.ClusterRedisOK, live.ClusterFailOpen, live.ClusterFailClosed} {
		keys = append(keys, "cluster.mode."+m)
	}
	for _, v := range []Overview{{}, {Cluster: &live.Cluster{}}} {
		inFlight, queued := v.summaryKeys()
		keys = append(keys, inFlight, queued)
	}
	for _, b := range []string{"rpm", "rpd", "tpm", "tpd"} {
		keys = append(keys, "budget."+b)
	}
	for _, s := range []string{"openai", "anthropic"} {
		keys = append(keys, "style."+s)
	}
	for _, op := range []string{DiffAdded, DiffRemoved, DiffChanged} {
		keys = append(keys, "audit.op."+op)
	}
	for _, f := range append(ConnectionFieldNames(), SettingsFieldNames()...) {
		keys = append(keys, "field."+f)
	}
	for _, k := range keys {
		if !l.HasKey(k) {
			t.Errorf("key %q is not in the en catalog", k)
		}
	}
}
