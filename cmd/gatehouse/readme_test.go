package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/nodetest"
	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// runnableMark, on the line before a fence, marks a README snippet that the doc test
// runs as written against a fresh demo.
const runnableMark = "<!-- runnable -->"

// snippet is one fenced block of a Markdown document marked runnable.
type snippet struct {
	lang string // the fence's info string: "sh" or "js"
	line int    // the fence's line, 1-based
	code string
	doc  string // the document it is in, for errors ("" reads as README)
}

// snippetDocs are the documents whose marked snippets the doc tests run, in order: the
// README (whose setup block defines what the others use), then the operator's guide.
var snippetDocs = []string{"README.md", filepath.Join("docs", "OPERATING.md")}

// docSnippets returns the blocks marked mark in every document of snippetDocs, in order,
// each naming its document.
func docSnippets(mark string) ([]snippet, error) {
	var out []snippet
	for _, name := range snippetDocs {
		doc, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			return nil, err
		}
		sns, err := markedSnippets(string(doc), mark)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for i := range sns {
			sns[i].doc = name
		}
		out = append(out, sns...)
	}
	return out, nil
}

// where names a snippet's place for an error: its document and line.
func (sn snippet) where() string {
	doc := sn.doc
	if doc == "" {
		doc = "README"
	}
	return fmt.Sprintf("%s line %d", doc, sn.line)
}

// freshDatabaseMark marks the README's snippet for a fresh shared database, run by
// TestReadmeFreshDatabase against an empty migrated database rather than the demo.
const freshDatabaseMark = "<!-- runnable: fresh database -->"

// runnableSnippets returns the fenced blocks of doc marked runnableMark, in order. A mark
// not followed by a fence, or a fence left open, is an error naming its line.
func runnableSnippets(doc string) ([]snippet, error) {
	return markedSnippets(doc, runnableMark)
}

// markedSnippets returns the fenced blocks of doc marked mark, in order.
func markedSnippets(doc, mark string) ([]snippet, error) {
	lines := strings.Split(doc, "\n")
	var out []snippet
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != mark {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			return nil, fmt.Errorf("line %d: %s is not followed by a fenced block", i+1, mark)
		}
		sn := snippet{lang: strings.TrimSpace(strings.TrimPrefix(lines[i+1], "```")), line: i + 2}
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			sn.code += lines[j] + "\n"
		}
		if j == len(lines) {
			return nil, fmt.Errorf("line %d: the fenced block is not closed", sn.line)
		}
		if sn.lang != "sh" && sn.lang != "js" {
			return nil, fmt.Errorf("line %d: a runnable block must be sh or js, not %q", sn.line, sn.lang)
		}
		out = append(out, sn)
		i = j
	}
	return out, nil
}

// runShSnippets runs each sh snippet with bash -euo pipefail in dir, in order, with env;
// what a snippet exports is there for the next (as when they are pasted into one
// terminal). The first snippet to fail is the error, naming its line and output.
func runShSnippets(ctx context.Context, snippets []snippet, dir string, env []string) error {
	envFile := filepath.Join(dir, ".snippet-env")
	for _, sn := range snippets {
		if sn.lang != "sh" {
			continue
		}
		script := "set -euo pipefail\nif [ -f " + envFile + " ]; then . " + envFile + "; fi\n" +
			sn.code + "\nexport -p > " + envFile + "\n"
		cmd := exec.CommandContext(ctx, "bash", "-c", script)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: the sh block failed: %v\n%s\noutput:\n%s", sn.where(), err, sn.code, out.String())
		}
	}
	return nil
}

// TestReadmeSnippetRunner: the runner carries a snippet's exports to the next, and a
// broken snippet fails the run naming its line (the doc test cannot pass on a README
// whose snippets stop working).
func TestReadmeSnippetRunner(t *testing.T) {
	doc := "# t\n\n" + runnableMark + "\n```sh\nexport GREETING=hello\n```\n\n```sh\nexit 1 # not marked\n```\n\n" +
		runnableMark + "\n```sh\ntest \"$GREETING\" = hello\n```\n"
	sns, err := runnableSnippets(doc)
	if err != nil || len(sns) != 2 {
		t.Fatalf("runnableSnippets = %d snippets, %v; want the 2 marked", len(sns), err)
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	if err := runShSnippets(t.Context(), sns, t.TempDir(), env); err != nil {
		t.Fatalf("working snippets: %v", err)
	}

	broken := doc + "\n" + runnableMark + "\n```sh\ncurl -sS --fail-with-body http://127.0.0.1:1/\necho went-on\n```\n"
	sns, err = runnableSnippets(broken)
	if err != nil || len(sns) != 3 {
		t.Fatalf("runnableSnippets = %d snippets, %v; want 3", len(sns), err)
	}
	err = runShSnippets(t.Context(), sns, t.TempDir(), env)
	if err == nil {
		t.Fatal("a snippet whose curl cannot connect passed")
	}
	if want := fmt.Sprintf("README line %d:", strings.Count(broken[:strings.LastIndex(broken, "```sh")], "\n")+1); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the broken block's line (%s)", err, want)
	}
	if _, output, _ := strings.Cut(err.Error(), "output:\n"); strings.Contains(output, "went-on") {
		t.Errorf("the broken block went on after its failing command: %v", err)
	}

	for _, bad := range []string{runnableMark + "\ntext\n", runnableMark + "\n```sh\nopen\n", runnableMark + "\n```python\nx\n```\n"} {
		if _, err := runnableSnippets(bad); err == nil {
			t.Errorf("runnableSnippets(%q) = nil error, want one naming the line", bad)
		}
	}
}

// The npm packages the README's JavaScript snippets import (the OpenAI and @google/genai
// versions are the gateway SDK tests' own, so one install serves both).
var readmeNodePackages = []struct{ pkg, short, version string }{
	{"openai", "openai", "6.49.0"},
	{"@anthropic-ai/sdk", "anthropic", "1.17.0"},
	{"@google/genai", "genai", "2.32.0"},
}

// TestReadmeSnippets runs every snippet marked runnable in the README and the operator's
// guide (docs/OPERATING.md), as written, against a fresh demo (the built binary, a temp
// data dir, its managed Postgres): the sh blocks in one terminal-like sequence from a
// scratch directory, the README's first, then the JavaScript SDK snippets (OpenAI,
// Anthropic, @google/genai) with node when node and npm are installed.
func TestReadmeSnippets(t *testing.T) {
	sns, err := docSnippets(runnableMark)
	if err != nil {
		t.Fatal(err)
	}
	langs := map[string]int{}
	for _, sn := range sns {
		langs[sn.lang]++
	}
	if langs["sh"] < 5 || langs["js"] != 3 {
		t.Fatalf("README and docs/OPERATING.md have %d runnable sh and %d js snippets; want the setup and API sh blocks and the 3 SDK snippets", langs["sh"], langs["js"])
	}

	dataDir := privateDir(t, nil)
	p := startServe(t, dataDir, nil, nil, "--demo")
	work := t.TempDir()
	env := append(testEnv(dataDir, p.addr), "PATH="+filepath.Dir(binPath)+":"+os.Getenv("PATH"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := runShSnippets(ctx, sns, work, env); err != nil {
		t.Fatal(err)
	}

	nodeModules := filepath.Join(work, "node_modules")
	var node string
	for _, np := range readmeNodePackages {
		var dir string
		dir, node = nodetest.Package(t, np.pkg, np.short, np.version)
		link := filepath.Join(nodeModules, np.pkg)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(dir, "node_modules", np.pkg), link); err != nil {
			t.Fatal(err)
		}
	}
	key, err := os.ReadFile(filepath.Join(dataDir, demoKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	jsEnv := append(env, "GH=http://"+p.addr, "CLIENT_KEY="+strings.TrimSpace(string(key)))
	for i, sn := range sns {
		if sn.lang != "js" {
			continue
		}
		file := filepath.Join(work, fmt.Sprintf("snippet-%d.mjs", i))
		if err := os.WriteFile(file, []byte(sn.code), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, node, file)
		cmd.Dir, cmd.Env = work, jsEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: the js block failed: %v\n%s\noutput:\n%s", sn.where(), err, sn.code, out)
		}
	}
}

// TestReadmeFreshDatabase runs the docs' snippet for a fresh shared database (in the
// operator's guide's cluster section) with that section's variables (GATEHOUSE_DATABASE_URL, GATEHOUSE_SECRET_KEY) against a
// migrated database nobody has bootstrapped: the token it exports answers the API, the
// client key the gateway, and the user it adds signs in.
func TestReadmeFreshDatabase(t *testing.T) {
	t.Parallel()
	sns, err := docSnippets(freshDatabaseMark)
	if err != nil || len(sns) != 1 || sns[0].lang != "sh" {
		t.Fatalf("the docs' fresh-database snippets: %d, %v; want one sh block", len(sns), err)
	}
	dbURL, secret := storetest.URL(t), store.GenerateSecretKey()
	vars := []string{"GATEHOUSE_DATABASE_URL=" + dbURL, "GATEHOUSE_SECRET_KEY=" + secret}
	p := startServe(t, privateDir(t, nil), nil, vars)
	work := t.TempDir()
	env := append(testEnv(privateDir(t, nil), freeAddr(t), vars...), "PATH="+filepath.Dir(binPath)+":"+os.Getenv("PATH"))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := runShSnippets(ctx, sns, work, env); err != nil {
		t.Fatal(err)
	}
	exported, err := os.ReadFile(filepath.Join(work, ".snippet-env"))
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) string {
		m := regexp.MustCompile(`declare -x ` + name + `="([^"]*)"`).FindStringSubmatch(string(exported))
		if m == nil {
			t.Fatalf("the snippet exported no %s", name)
		}
		return m[1]
	}
	get := func(path, bearer string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if st := get("/api/v1/client-keys", value("TOKEN")); st != http.StatusOK {
		t.Errorf("GET /api/v1/client-keys with the snippet's TOKEN: %d, want 200", st)
	}
	if st := get("/v1/models", value("CLIENT_KEY")); st != http.StatusOK {
		t.Errorf("GET /v1/models with the snippet's CLIENT_KEY: %d, want 200", st)
	}
	if st := signInStatus(t, p, "you@example.com", "choose-one"); st < 300 || st > 399 {
		t.Errorf("sign-in as the snippet's user: %d, want a redirect", st)
	}
}
