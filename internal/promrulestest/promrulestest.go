// Package promrulestest checks docs/prometheus-alerts.yaml with promtool and
// evaluates its rules over metrics scraped from a gateway: `promtool test
// rules` with the scraped series as input, each rule expected to fire on
// the series the test names and nowhere else.
package promrulestest

import (
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Rule is one alerting rule of the file, as the tests read it.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Promtool returns promtool's path; the test fails (never skips) without it.
func Promtool(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (apt-get install prometheus; scripts/test installs it)")
	}
	return p
}

// Check runs `promtool check rules` on the rules file at path.
func Check(t testing.TB, path string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), Promtool(t), "check", "rules", path).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", path, err, out)
	}
}

// Rules reads the alerting rules of the file at path.
func Rules(t testing.TB, path string) []Rule {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []Rule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// ParseScrape reads a /metrics answer in the text format.
func ParseScrape(r io.Reader) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out, nil
}

// Evaluate checks the rules file at path with promtool, then runs `promtool
// test rules` over it with fams as input series: every counter rises from 0
// to its scraped value at the 5th minute, every gauge holds its scraped
// value throughout, and the rules are evaluated at the 5th minute. A rule
// named in want must fire exactly on the listed label sets (its own labels
// and annotations added and expanded); every other rule must stay silent.
// elsewhere names the rules another test drives into firing (rule → that
// test): the test fails on a rule that neither want nor elsewhere names,
// so that each rule of the file fires in some test.
func Evaluate(t testing.TB, path string, fams []*dto.MetricFamily, want map[string][]map[string]string, elsewhere map[string]string) {
	t.Helper()
	Check(t, path)
	rules := Rules(t, path)
	names := map[string]bool{}
	for _, r := range rules {
		names[r.Alert] = true
		_, here := want[r.Alert]
		if _, there := elsewhere[r.Alert]; !here && !there {
			t.Errorf("rule %s fires in no test: drive it here or name the test that does", r.Alert)
		}
	}
	for _, m := range []map[string][]map[string]string{want, toWant(elsewhere)} {
		for name := range m {
			if !names[name] {
				t.Errorf("rule %s is not in %s", name, path)
			}
		}
	}

	var input strings.Builder
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			s := f.GetName() + labelText(m.GetLabel())
			var values string
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v := m.GetCounter().GetValue()
				values = fmt.Sprintf("0 0 0 0 0 %g %g", v, v)
			case dto.MetricType_GAUGE:
				values = strings.TrimSpace(strings.Repeat(fmt.Sprintf("%g ", m.GetGauge().GetValue()), 7))
			case dto.MetricType_UNTYPED:
				values = strings.TrimSpace(strings.Repeat(fmt.Sprintf("%g ", m.GetUntyped().GetValue()), 7))
			default:
				continue // histograms and summaries: no rule reads them
			}
			fmt.Fprintf(&input, "      - series: '%s'\n        values: '%s'\n", s, values)
		}
	}
	var tests strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&tests, "      - eval_time: 5m\n        alertname: %s\n        exp_alerts:\n", r.Alert)
		exp := want[r.Alert]
		if len(exp) == 0 {
			tests.WriteString("          []\n")
			continue
		}
		for _, lbls := range exp {
			all := maps.Clone(lbls)
			if all == nil {
				all = map[string]string{}
			}
			maps.Copy(all, r.Labels)
			fmt.Fprintf(&tests, "          - exp_labels: %s\n            exp_annotations: %s\n", yamlMap(all), yamlMap(expand(r.Annotations, all)))
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := "rule_files:\n  - " + abs + "\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n" +
		input.String() + "    alert_rule_test:\n" + tests.String()
	testPath := filepath.Join(t.TempDir(), "rules_test.yaml")
	if err := os.WriteFile(testPath, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), Promtool(t), "test", "rules", testPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s\n--- test file:\n%s", err, out, doc)
	}
}

func toWant(m map[string]string) map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for k := range m {
		out[k] = nil
	}
	return out
}

func labelText(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, 0, len(ls))
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func yamlMap(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s: %q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

var labelRef = regexp.MustCompile(`\{\{ \$labels\.([a-z_]+) \}\}`)

// expand fills in the rule's {{ $labels.x }} references, as Prometheus does.
func expand(ann map[string]string, labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ann {
		out[k] = labelRef.ReplaceAllStringFunc(v, func(ref string) string {
			return labels[labelRef.FindStringSubmatch(ref)[1]]
		})
	}
	return out
}
