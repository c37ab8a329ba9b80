package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// root is the module root, two levels above this package.
const root = "../.."

// skipDir reports whether a directory holds no code of ours: hidden directories, testdata,
// node_modules, and the outputs of the tools.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" ||
		name == "bin" || name == "bench-results" || name == "gatehouse-data"
}

// goDirs returns every directory under root holding non-test Go files, with those files.
func goDirs(t *testing.T) map[string][]string {
	t.Helper()
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// rel is path relative to the module root, with forward slashes.
func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return filepath.ToSlash(r)
}

// TestEveryPackageHasADocComment lists each package (a directory with non-test Go files)
// none of whose files has a doc comment on its package clause.
func TestEveryPackageHasADocComment(t *testing.T) {
	dirs := goDirs(t)
	if len(dirs) < 10 {
		t.Fatalf("found only %d Go package directories under %s; is root right?", len(dirs), root)
	}
	var missing []string
	for dir, files := range dirs {
		documented := false
		for _, f := range files {
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatalf("%s: %v", rel(f), err)
			}
			if file.Doc != nil && strings.TrimSpace(file.Doc.Text()) != "" {
				documented = true
				break
			}
		}
		if !documented {
			missing = append(missing, rel(dir))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("packages without a doc comment (say what the package owns, in doc.go or above its package clause):\n\t%s",
			strings.Join(missing, "\n\t"))
	}
}

// historyPatterns match references to the history of the work: issue numbers ("issue 23",
// "issues 12 and 14", "#23"), round names ("round three", "this round") and dated
// sittings ("the 2026-11-20 sitting", a heading carrying a date).
var historyPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bissues?\s+(no\.?\s*)?#?\d+`),
	regexp.MustCompile(`(^|[\s(\[,;])#\d+\b`),
	regexp.MustCompile(`(?i)\brounds?\s+(one|two|three|four|five|six|seven|eight|nine|ten|\d+)\b`),
	regexp.MustCompile(`(?i)\b(this|last|previous|next|earlier|later|first|second|third|same|that|each|every)\s+round\b`),
	regexp.MustCompile(`(?i)\bround\s+(one|two|three|four|five|six)'s\b`),
	regexp.MustCompile(`(?i)\bsittings?\b.*\b\d{4}-\d{2}-\d{2}\b|\b\d{4}-\d{2}-\d{2}\b.*\bsittings?\b`),
}

// roundTrip matches the rounds that are not the work's: a round trip, round-robin.
var roundTrip = regexp.MustCompile(`(?i)\bround[- ](trips?|robin)\b`)

// historyIn returns the lines of text that match a history pattern, as "name:line: text".
// A Markdown heading carrying a date is a dated sitting too.
func historyIn(name, text string, firstLine int, markdown bool) []string {
	var out []string
	date := regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}\b`)
	for i, line := range strings.Split(text, "\n") {
		line := roundTrip.ReplaceAllString(line, "")
		hit := markdown && strings.HasPrefix(line, "#") && date.MatchString(line)
		for _, re := range historyPatterns {
			if hit {
				break
			}
			hit = re.MatchString(line)
		}
		if hit {
			out = append(out, name+":"+strconv.Itoa(firstLine+i)+": "+strings.TrimSpace(line))
		}
	}
	return out
}

// markdownDocs are the documents held to the rule: README.md and docs/*.md.
func markdownDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// TestNoHistoryInDocs lists every line of README.md, docs/*.md and the comments of non-test
// Go files that cites an issue number, a round or a dated sitting.
func TestNoHistoryInDocs(t *testing.T) {
	var found []string
	for _, doc := range markdownDocs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		found = append(found, historyIn(rel(doc), string(b), 1, true)...)
	}
	for _, files := range goDirs(t) {
		for _, f := range files {
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, f, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("%s: %v", rel(f), err)
			}
			for _, cg := range file.Comments {
				found = append(found, historyInComment(rel(f), fset, cg)...)
			}
		}
	}
	if len(found) > 0 {
		t.Errorf("%d lines cite the history of the work (git log keeps it; say why, not when):\n\t%s",
			len(found), strings.Join(found, "\n\t"))
	}
}

func historyInComment(name string, fset *token.FileSet, cg *ast.CommentGroup) []string {
	var out []string
	for _, c := range cg.List {
		out = append(out, historyIn(name, c.Text, fset.Position(c.Slash).Line, false)...)
	}
	return out
}

// TestHistoryPatterns: the patterns catch each form of history reference and leave
// ordinary prose alone.
func TestHistoryPatterns(t *testing.T) {
	for _, bad := range []string{
		"see issue 23", "Issues 12 and 14 added it", "(issue 23, item 6)", "fixed in #23",
		"Round three's dashboard", "measured this round", "as in round 2", "the 2026-11-20 sitting",
		"Sittings of 2026-12-01",
	} {
		if len(historyIn("x", bad, 1, false)) == 0 {
			t.Errorf("%q passed the check", bad)
		}
	}
	if len(historyIn("x", "## Results, 2026-12-07", 1, true)) == 0 {
		t.Error("a dated Markdown heading passed the check")
	}
	for _, good := range []string{
		"a round trip to Redis", "rounded up to the next token", "measured 2026-12-07 on the dev VM",
		"color #fff", "golang/go#12345", "the issue is the lock", "two rounds of retries", "a second round trip to Redis", "each round-trip",
		"`#` starts a heading",
	} {
		if got := historyIn("x", good, 1, false); len(got) != 0 {
			t.Errorf("ordinary prose flagged: %q", got)
		}
	}
}

// docLimits are the line budgets of the documents a newcomer reads first: a map, a
// page of current results and a front page stay short or stop being read.
var docLimits = map[string]int{
	"README.md":            250,
	"docs/ARCHITECTURE.md": 600,
	"docs/BENCHMARKS.md":   400,
}

// TestDocSizes: README.md, docs/ARCHITECTURE.md and docs/BENCHMARKS.md stay within their
// line budgets; what does not fit goes to docs/OPERATING.md or a package's doc comment.
func TestDocSizes(t *testing.T) {
	for name, limit := range docLimits {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "\n"); n > limit {
			t.Errorf("%s has %d lines; its budget is %d", name, n, limit)
		}
	}
}

// testName matches a test, benchmark or fuzz target named in a document.
var testName = regexp.MustCompile("`(?:[a-z/]+ )?((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)`")

// TestDocsNameRealTests: every test, benchmark and fuzz target a document names (in
// backticks) exists, so "where each invariant is tested" cannot point at nothing.
func TestDocsNameRealTests(t *testing.T) {
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, doc := range markdownDocs(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testName.FindAllStringSubmatch(string(b), -1) {
			if name := strings.TrimSuffix(m[1], "$"); !defined[name] {
				missing = append(missing, rel(doc)+": "+name)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("documents name tests that do not exist:\n\t%s", strings.Join(missing, "\n\t"))
	}
}
